// tests/file_util.c: helpers of the common/ suites (see tests/file_util.h).
#include "tests/file_util.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/json.h"
#include "common/util.h"
#include "tests/testutil.h"

int test_dir_entries(const char* dir) {
    DIR* d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent* e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

void test_write_text(const char* path, const char* s, size_t n) {
    FILE* f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(s, 1, n, f), n);
    fclose(f);
}

char* test_read_text(const char* path, size_t* n) {
    char err[512];
    char* s = util_read_file(path, n, err, sizeof(err));
    ck_assert_msg(s != NULL, "%s", err);
    return s;
}

int test_have_python(const char* module) {
    if (access(TEST_PYTHON, X_OK) != 0) return 0;
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "%s -c 'import %s' >/dev/null 2>&1", TEST_PYTHON, module);
    return system(cmd) == 0;
}

int test_run_python(const char* dir, const char* script, const char* args) {
    char path[1024], cmd[10000];
    snprintf(path, sizeof(path), "%s/check.py", dir);
    test_write_text(path, script, strlen(script));
    snprintf(cmd, sizeof(cmd), "%s %s %s", TEST_PYTHON, path, args);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

char* json_escape(const char* s, size_t n) {
    JsonBuf j;
    json_init(&j);
    json_append_escaped(&j, s, n);
    return j.buf; // the caller frees
}
