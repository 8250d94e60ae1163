// tests/csv_util.c: results.csv of scripts/ablate read as a table (tests/csv_util.h).
#include "tests/csv_util.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "tests/testutil.h"

static void split_line(const char* line, char out[64][64], int* n) {
    *n = 0;
    size_t k = 0;
    int quoted = 0;
    for (const char* p = line;; p++) {
        if (*p == '"') {
            quoted = !quoted;
        } else if ((*p == ',' && !quoted) || *p == '\0' || *p == '\r') {
            out[*n][k < 63 ? k : 63] = '\0';
            if (++*n == 64 || *p != ',') return;
            k = 0;
        } else if (k < 63) {
            out[*n][k++] = *p;
        }
    }
}

Csv* read_csv(const char* path) {
    size_t len;
    char err[512];
    char* text = util_read_file(path, &len, err, sizeof(err));
    ck_assert_msg(text != NULL, "%s missing: %s", path, err);
    Csv* c = calloc(1, sizeof(Csv));
    char* save = NULL;
    char tmp[64][64];
    int row = -1;
    for (char* line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        int n;
        split_line(line, tmp, &n);
        if (row < 0) {
            c->ncol = n;
            for (int i = 0; i < n; i++)
                util_strlcpy(c->head[i], tmp[i], 48);
        } else if (row < 16) {
            ck_assert_int_eq(n, c->ncol);
            memcpy(c->cell[row], tmp, sizeof(tmp));
        }
        row++;
    }
    c->nrow = row;
    free(text);
    return c;
}

int col(const Csv* c, const char* name) {
    for (int i = 0; i < c->ncol; i++)
        if (!strcmp(c->head[i], name)) return i;
    return -1;
}

// the cell of column `name` in the row whose `run` starts with `run_prefix`
const char* cell(const Csv* c, const char* run_prefix, const char* name) {
    int r = col(c, "run"), k = col(c, name);
    ck_assert_msg(r >= 0 && k >= 0, "column %s missing", name);
    for (int i = 0; i < c->nrow; i++)
        if (!strncmp(c->cell[i][r], run_prefix, strlen(run_prefix))) return c->cell[i][k];
    ck_abort_msg("no run %s", run_prefix);
    return NULL;
}
