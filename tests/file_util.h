// tests/file_util.h: helpers of the common/ suites (tests/test_json.c, test_npy.c, test_util.c):
// whole-file reads and writes that fail the test on error, a count of directory entries, a JSON
// string's quoted form, and running a Python script written by the test under /usr/bin/python3.
#ifndef ATTNLAB_FILE_UTIL_H
#define ATTNLAB_FILE_UTIL_H

#include <stddef.h>

#define TEST_PYTHON "/usr/bin/python3"

// Number of directory entries other than . and ..
int test_dir_entries(const char* dir);
// Write n bytes of s to path / read the whole file (malloc'd, *n bytes); fail the test on error.
void test_write_text(const char* path, const char* s, size_t n);
char* test_read_text(const char* path, size_t* n);
// The quoted, escaped JSON form of s[0..n) (json_append_escaped of common/json.h), malloc'd.
char* json_escape(const char* s, size_t n);
// 1 when TEST_PYTHON exists and imports module, else 0.
int test_have_python(const char* module);
// Run a Python script (written to dir/check.py) with arguments; returns its exit status.
int test_run_python(const char* dir, const char* script, const char* args);

#endif
