// tests/csv_util.h: results.csv of scripts/ablate read as a table (tests/test_ablate.c,
// tests/test_ablate_stream.c): at most 16 rows x 64 columns, RFC 4180 quoting without ""
// escapes (settings strings hold commas).
#ifndef ATTNLAB_CSV_UTIL_H
#define ATTNLAB_CSV_UTIL_H

typedef struct {
    char head[64][48];
    char cell[16][64][64];
    int ncol, nrow;
} Csv;

// The file at path (the test fails when it is missing); free() it.
Csv* read_csv(const char* path);
// The index of column name, or -1.
int col(const Csv* c, const char* name);
// The cell of column `name` in the row whose `run` starts with `run_prefix` (the test fails
// when either is missing).
const char* cell(const Csv* c, const char* run_prefix, const char* name);

#endif
