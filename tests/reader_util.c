// tests/reader_util.c: helpers of the reader suites (see reader_util.h).
#include "tests/reader_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "common/util.h"
#include "data/shard.h"
#include "tests/testutil.h"

int rd_run(const char* tool, const char* args, char* out, size_t cap) {
    char cmd[8192];
    snprintf(cmd, sizeof(cmd), "cd %s && OMP_NUM_THREADS=1 %s/%s %s 2>&1", test_repo_root(),
             test_build_dir(), tool, args);
    FILE* p = popen(cmd, "r");
    ck_assert_msg(p != NULL, "cannot run %s", cmd);
    size_t n = 0;
    out[0] = '\0';
    char buf[4096];
    size_t k;
    while ((k = fread(buf, 1, sizeof(buf), p)) > 0) {
        if (n + 1 < cap) {
            size_t c = k < cap - 1 - n ? k : cap - 1 - n;
            memcpy(out + n, buf, c);
            n += c;
            out[n] = '\0';
        }
    }
    int st = pclose(p);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

const char* rd_expect(int want_rc, const char* tool, const char* args, const char* const* needles) {
    static char out[1 << 16];
    int rc = rd_run(tool, args, out, sizeof(out));
    ck_assert_msg(rc == want_rc, "%s %s: exit %d, expected %d; output:\n%.2000s", tool, args, rc,
                  want_rc, out);
    for (int i = 0; needles[i]; i++)
        ck_assert_msg(strstr(out, needles[i]) != NULL, "%s %s: output lacks '%s'; output:\n%.2000s",
                      tool, args, needles[i], out);
    return out;
}

const char* rd_train_tiny(const char* extra) {
    static char dir[600];
    snprintf(dir, sizeof(dir), "%s", test_tmpdir());
    char data[700], err[1024], p[800];
    snprintf(data, sizeof(data), "%s/data", dir);
    ck_assert_msg(util_mkdirs(data, err, sizeof(err)) == 0, "%s", err);
    enum { N = 4000 };
    uint16_t* t = mallocCheck(sizeof(uint16_t) * N);
    for (int i = 0; i < N; i++)
        t[i] = (uint16_t)(i % 50 == 0 ? 256 : 'a' + (i * 7) % 26);
    snprintf(p, sizeof(p), "%s/train_000000.bin", data);
    ck_assert_msg(shard_write(p, t, N, err, sizeof(err)) == 0, "%s", err);
    snprintf(p, sizeof(p), "%s/val_000000.bin", data);
    ck_assert_msg(shard_write(p, t, 1000, err, sizeof(err)) == 0, "%s", err);
    free(t);
    char args[4096], out[1 << 14];
    snprintf(args, sizeof(args),
             "n_layer=2 n_head=2 n_embd=16 block_size=16 seq_len=16 batch_size=2 vocab_size=257 "
             "tokenizer=byte threads=1 log_every=1 eval_every=0 sample_every=0 warmup_steps=0 "
             "max_steps=2 checkpoint_every=2 train_data='%s/train_*.bin' "
             "val_data='%s/val_*.bin' out_dir=%s %s",
             data, data, dir, extra ? extra : "");
    int rc = rd_run("train", args, out, sizeof(out));
    ck_assert_msg(rc == 0, "train %s: exit %d\n%.3000s", args, rc, out);
    snprintf(p, sizeof(p), "%s/model_00000002.bin", dir);
    ck_assert_msg(access(p, R_OK) == 0, "%s was not written; output:\n%.2000s", p, out);
    return dir;
}

unsigned char* rd_slurp(const char* path, size_t* n) {
    FILE* f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char* b = mallocCheck((size_t)len + 1);
    ck_assert(fread(b, 1, (size_t)len, f) == (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

void rd_write(const char* path, const void* p, size_t n) {
    FILE* f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    ck_assert(fwrite(p, 1, n, f) == n);
    ck_assert(fclose(f) == 0);
}

void rd_fix_trailer(unsigned char* buf, size_t n) {
    ck_assert(n >= 8);
    uint32_t crc = (uint32_t)crc32(0L, buf, (uInt)(n - 8));
    uint32_t tr[2] = {crc, 0x4b4e4c41u}; // "ALNK", the end magic of attnlab files
    memcpy(buf + n - 8, tr, 8);
}
