// tests/test_run_state.c: the run-state file (common/run_state.h) in-process: a version-2 round
// trip through the trainer's calls (the loop section, optim_state_put/get, dataloader_state_put/
// get), the file's bytes against the documented layout (a file composed here byte by byte equals
// the writer's), each rejection of a bad file (bad magic or version, a section past the end of the
// file, bytes after the last one, a malformed name, a missing, duplicate or unknown section, a
// checksum mismatch, wrong payload sizes, another optimizer; every message names the file and
// the section), and version-1 files (written by the test-only copy of the old writer,
// tests/run_state_v1.c) read field for field.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/run_state.h"
#include "common/util.h"
#include "data/dataloader.h"
#include "model/checkpoint.h"
#include "optim/optim.h"
#include "tests/model_util.h"
#include "tests/reader_util.h"
#include "tests/run_state_v1.h"
#include "tests/testutil.h"

#define N_PARAMS 37

static void make_opt(Optimizer* o, const char* name, uint64_t seed) {
    optim_init(o, optim_lookup(name), N_PARAMS);
    Rng r;
    rng_seed(&r, seed);
    size_t n = (size_t)o->def->state_per_param * N_PARAMS;
    if (n) fill_normal(o->state, n, 1.0f, &r);
    o->t = 1234567 + (long)seed;
}

static LoopState some_loop(void) {
    LoopState l = {.step = 123456789012L, .best_val = 2.75f, .skips = 3};
    for (int i = 0; i < 4; i++)
        l.rng.s[i] = 0x0102030405060708ull * (uint64_t)(i + 1) + 0x9e3779b97f4a7c15ull;
    return l;
}

static DataLoaderState some_pos(void) {
    DataLoaderState p = {.epoch = 7, .shard_pos = 11, .window_pos = 13};
    for (int i = 0; i < 4; i++)
        p.rng.s[i] = 0xa5a5a5a5a5a5a5a5ull ^ ((uint64_t)i << 40);
    return p;
}

// The trainer's write: loop, data, optim (run_checkpoint_save, model/run/checkpoints.c).
static void write_v2(const char* path, const LoopState* l, const Optimizer* o,
                     const DataLoaderState* p) {
    char err[2048];
    RunStateWriter w;
    ck_assert_msg(run_state_create(&w, path, 2, l, err, sizeof(err)) == 0, "%s", err);
    dataloader_state_put(p, &w);
    optim_state_put(o, &w);
    ck_assert_msg(run_state_finish(&w, err, sizeof(err)) == 0, "%s", err);
}

// ---- a version-2 file composed byte by byte from the documented layout (docs/design.md)

typedef struct {
    char name[RUN_STATE_NAME_BYTES]; // raw bytes
    uint64_t size;                   // the length field
    unsigned char data[4096];
    size_t n; // payload bytes written
} Sec;

typedef struct {
    int32_t magic, version, count;
    int nsec;
    Sec sec[8];
} Doc;

static void le(unsigned char* p, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static Sec* add(Doc* d, const char* name, const void* data, size_t n) {
    Sec* s = &d->sec[d->nsec++];
    memset(s, 0, sizeof(*s));
    memcpy(s->name, name,
           strlen(name) < RUN_STATE_NAME_BYTES ? strlen(name) : RUN_STATE_NAME_BYTES);
    memcpy(s->data, data, n);
    s->n = n;
    s->size = n;
    d->count = d->nsec;
    return s;
}

static void loop_bytes(unsigned char* b, const LoopState* l) {
    le(b, (uint64_t)l->step, 8);
    for (int i = 0; i < 4; i++)
        le(b + 8 + 8 * i, l->rng.s[i], 8);
    uint32_t bits;
    memcpy(&bits, &l->best_val, 4);
    le(b + 40, bits, 4);
    le(b + 44, (uint32_t)l->skips, 4);
}

static size_t optim_bytes(unsigned char* b, const Optimizer* o) {
    memset(b, 0, 32);
    memcpy(b, o->def->name, strlen(o->def->name));
    le(b + 32, o->n, 8);
    le(b + 40, (uint64_t)o->t, 8);
    le(b + 48, (uint32_t)o->def->state_per_param, 4);
    size_t na = sizeof(float) * o->n * (size_t)o->def->state_per_param;
    if (na) memcpy(b + 52, o->state, na);
    return 52 + na;
}

// The trainer's three sections, in the trainer's order.
static void doc_valid(Doc* d, const LoopState* l, const Optimizer* o, const DataLoaderState* p) {
    memset(d, 0, sizeof(*d));
    d->magic = RUN_STATE_MAGIC;
    d->version = 2;
    unsigned char b[4096];
    loop_bytes(b, l);
    add(d, "loop", b, 48);
    dataloader_state_write(p, b);
    add(d, "data", b, 56);
    add(d, "optim", b, optim_bytes(b, o));
}

static void doc_write(const Doc* d, const char* path) {
    unsigned char* buf = malloc(1 << 16);
    size_t n = 0;
    le(buf, (uint32_t)d->magic, 4);
    le(buf + 4, (uint32_t)d->version, 4);
    le(buf + 8, (uint32_t)d->count, 4);
    n = 12;
    for (int i = 0; i < d->nsec; i++) {
        memcpy(buf + n, d->sec[i].name, 16);
        le(buf + n + 16, d->sec[i].size, 8);
        memcpy(buf + n + 24, d->sec[i].data, d->sec[i].n);
        n += 24 + d->sec[i].n;
    }
    n += 8;
    rd_fix_trailer(buf, n); // zlib's crc32, not the project's
    rd_write(path, buf, n);
    free(buf);
}

static Sec* find(Doc* d, const char* name) {
    for (int i = 0; i < d->nsec; i++)
        if (strcmp(d->sec[i].name, name) == 0) return &d->sec[i];
    ck_abort_msg("no section %s", name);
    return NULL;
}

static void drop(Doc* d, const char* name) {
    Sec* s = find(d, name);
    int i = (int)(s - d->sec);
    memmove(&d->sec[i], &d->sec[i + 1], sizeof(Sec) * (size_t)(d->nsec - i - 1));
    d->count = --d->nsec;
}

static int same_file(const char* a, const char* b) {
    size_t na, nb;
    unsigned char *x = rd_slurp(a, &na), *y = rd_slurp(b, &nb);
    int eq = na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return eq;
}

// Read path as the trainer does (adamw over N_PARAMS), expecting a refusal naming the file and
// carrying both phrases.
static void expect_reject(const char* path, const char* want1, const char* want2) {
    Optimizer o;
    optim_init(&o, optim_lookup("adamw"), N_PARAMS);
    LoopState l;
    DataLoaderState p;
    char err[2048] = "";
    int rc = test_run_state_read(path, &l, &o, &p, err, sizeof(err));
    optim_free(&o);
    ck_assert_msg(rc == -1, "%s was accepted (wanted '%s')", path, want1);
    ck_assert_msg(strstr(err, path) && strstr(err, want1) && strstr(err, want2),
                  "the message does not name %s, '%s' and '%s': %s", path, want1, want2, err);
}

static void expect_accept(const char* path, const Optimizer* want_o) {
    Optimizer o;
    optim_init(&o, want_o->def, N_PARAMS);
    LoopState l;
    DataLoaderState p;
    char err[2048] = "";
    ck_assert_msg(test_run_state_read(path, &l, &o, &p, err, sizeof(err)) == 0, "%s", err);
    LoopState wl = some_loop();
    DataLoaderState wp = some_pos();
    ck_assert_int_eq(l.step, wl.step);
    ck_assert(memcmp(l.rng.s, wl.rng.s, sizeof(wl.rng.s)) == 0);
    ck_assert(l.best_val == wl.best_val);
    ck_assert_int_eq(l.skips, wl.skips);
    ck_assert(p.epoch == wp.epoch && p.shard_pos == wp.shard_pos && p.window_pos == wp.window_pos);
    ck_assert(memcmp(p.rng.s, wp.rng.s, sizeof(wp.rng.s)) == 0);
    ck_assert_int_eq(o.t, want_o->t);
    size_t na = (size_t)o.def->state_per_param * N_PARAMS;
    ck_assert(na == 0 || memcmp(o.state, want_o->state, sizeof(float) * na) == 0);
    optim_free(&o);
}

// ---------------------------------------------------------------------------------------------

START_TEST(test_v2_round_trip) {
    const char* dir = test_tmpdir();
    const char* names[] = {"adamw", "signsgd"}; // two state arrays, and none
    for (int k = 0; k < 2; k++) {
        char p[1100], q[1100];
        snprintf(p, sizeof(p), "%s/state_%s.bin", dir, names[k]);
        snprintf(q, sizeof(q), "%s/composed_%s.bin", dir, names[k]);
        Optimizer o;
        make_opt(&o, names[k], 5 + (uint64_t)k);
        LoopState l = some_loop();
        DataLoaderState pos = some_pos();
        write_v2(p, &l, &o, &pos);
        expect_accept(p, &o);
        // the writer's bytes are the documented layout: header, loop, data, optim, trailer
        Doc d;
        doc_valid(&d, &l, &o, &pos);
        doc_write(&d, q);
        ck_assert_msg(same_file(p, q), "%s differs from the layout composed in %s", p, q);
        // readers find sections by name, in any order
        Doc e = d;
        e.sec[0] = d.sec[2];
        e.sec[2] = d.sec[0];
        doc_write(&e, q);
        expect_accept(q, &o);
        optim_free(&o);
    }
}
END_TEST

START_TEST(test_v2_small_file_found) {
    // a run-state file without optimizer arrays is far smaller than a model file's header; the
    // directory scan takes it (its minimum is the version-2 header and loop section)
    const char* dir = test_tmpdir();
    Config c;
    test_tiny_config(&c, 257, 1, 2, 16, 16);
    GPT2 m;
    test_build_model(&m, &c, 1, 16, 1);
    char p[1100], err[2048];
    snprintf(p, sizeof(p), "%s/model_00000003.bin", dir);
    ck_assert_msg(ckpt_save_model(&m, p, 3, "n_layer = 1\n", err, sizeof(err)) == 0, "%s", err);
    gpt2_free(&m);
    Optimizer o;
    make_opt(&o, "signsgd", 1);
    LoopState l = some_loop();
    DataLoaderState pos = some_pos();
    snprintf(p, sizeof(p), "%s/state_00000003.bin", dir);
    write_v2(p, &l, &o, &pos);
    optim_free(&o);
    size_t n;
    free(rd_slurp(p, &n));
    ck_assert_uint_lt(n, 1024);
    ck_assert_int_eq(ckpt_find_latest(dir), 3);
}
END_TEST

START_TEST(test_v2_rejects) {
    const char* dir = test_tmpdir();
    char p[1100];
    snprintf(p, sizeof(p), "%s/state.bin", dir);
    Optimizer o;
    make_opt(&o, "adamw", 9);
    LoopState l = some_loop();
    DataLoaderState pos = some_pos();
    Doc base, d;
    doc_valid(&base, &l, &o, &pos);
    // the control: the unedited composed file is accepted, so each refusal below is its edit's
    doc_write(&base, p);
    expect_accept(p, &o);

    d = base, d.magic = 777, doc_write(&d, p);
    expect_reject(p, "not an attnlab run-state file (magic 777", "");
    d = base, d.version = 3, doc_write(&d, p);
    expect_reject(p, "run-state file version 3", "reads versions 1 and 2");
    d = base, d.version = 0, doc_write(&d, p);
    expect_reject(p, "version 0", "");
    // a section longer than what is left
    d = base, find(&d, "optim")->size += 1, doc_write(&d, p);
    expect_reject(p, "section 'optim'", "runs past the end of the file");
    d = base, find(&d, "loop")->size = 1u << 30, doc_write(&d, p);
    expect_reject(p, "section 'loop'", "runs past the end of the file");
    d = base, find(&d, "optim")->n -= 4, doc_write(&d, p); // the file ends inside it
    expect_reject(p, "section 'optim'", "runs past the end of the file");
    d = base, d.count = 4, doc_write(&d, p); // a fourth section header past the end
    expect_reject(p, "section 4 of 4 runs past the end of the file", "");
    d = base, d.count = 2, doc_write(&d, p); // the third section left over
    expect_reject(p, "bytes after the last of its 2 sections", "");
    d = base, d.count = 0, doc_write(&d, p);
    expect_reject(p, "0 sections", "");
    d = base, d.count = 17, doc_write(&d, p);
    expect_reject(p, "17 sections", "");
    d = base, find(&d, "optim")->size -= 4, doc_write(&d, p); // shorter, followed by 4 bytes
    expect_reject(p, "4 bytes after the last of its 3 sections", "");
    // names
    d = base, memcpy(find(&d, "data")->name, "da ta", 5), doc_write(&d, p);
    expect_reject(p, "section 2 (at offset", "malformed name");
    d = base, find(&d, "data")->name[10] = 'x', doc_write(&d, p); // not NUL-padded
    expect_reject(p, "section 2 (at offset", "malformed name");
    d = base, memset(find(&d, "data")->name, 'a', 16), doc_write(&d, p); // no NUL at all
    expect_reject(p, "malformed name", "");
    d = base, memset(find(&d, "data")->name, 0, 16), doc_write(&d, p); // empty
    expect_reject(p, "malformed name", "");
    // missing, duplicate, unknown
    const char* req[] = {"loop", "data", "optim"};
    for (int i = 0; i < 3; i++) {
        char want[64];
        snprintf(want, sizeof(want), "no section '%s'", req[i]);
        d = base, drop(&d, req[i]), doc_write(&d, p);
        expect_reject(p, want, "needs loop, data, optim");
    }
    d = base, add(&d, "data", find(&base, "data")->data, 56), doc_write(&d, p);
    expect_reject(p, "section 'data' appears twice", "");
    d = base, add(&d, "loop", find(&base, "loop")->data, 48), doc_write(&d, p);
    expect_reject(p, "section 'loop' appears twice", "");
    d = base, add(&d, "extra", "abc", 3), doc_write(&d, p);
    expect_reject(p, "unknown section 'extra'", "reads loop, data, optim");
    // payload sizes
    d = base, find(&d, "loop")->n = find(&d, "loop")->size = 47, doc_write(&d, p);
    expect_reject(p, "section 'loop' is 47 bytes, not 48", "");
    d = base, find(&d, "data")->n = find(&d, "data")->size = 55, doc_write(&d, p);
    expect_reject(p, "section 'data' is 55 bytes, not 56", "");
    d = base, find(&d, "data")->n = find(&d, "data")->size = 57, doc_write(&d, p);
    expect_reject(p, "section 'data' is 57 bytes, not 56", "");
    Sec* s = NULL;
    d = base, s = find(&d, "optim"), s->n = s->size = s->n - 4, doc_write(&d, p);
    expect_reject(p, "section 'optim': truncated while reading the optimizer state", "adamw");
    d = base, s = find(&d, "optim"), s->n = s->size = s->n + 4, doc_write(&d, p);
    expect_reject(p, "section 'optim': extra bytes after the optimizer state", "");
    d = base, s = find(&d, "optim"), s->n = s->size = 40, doc_write(&d, p);
    expect_reject(p, "section 'optim' is 40 bytes, shorter than its 52-byte header", "");
    d = base, s = find(&d, "optim"), le(s->data + 32, N_PARAMS + 1, 8), doc_write(&d, p);
    expect_reject(p, "optimizer state is adamw over 38 parameters", "the run uses adamw over 37");
    // another optimizer
    Optimizer sgd;
    make_opt(&sgd, "sgd", 2);
    write_v2(p, &l, &sgd, &pos);
    expect_reject(p, "optimizer state is sgd", "the run uses adamw");
    optim_free(&sgd);
    // a checksum mismatch: one payload byte flipped, the trailer left as written
    write_v2(p, &l, &o, &pos);
    size_t n;
    unsigned char* b = rd_slurp(p, &n);
    b[12 + 24 + 5] ^= 0x10;
    rd_write(p, b, n);
    free(b);
    expect_reject(p, "checksum mismatch", "");
    optim_free(&o);
}
END_TEST

START_TEST(test_v1_read) {
    const char* dir = test_tmpdir();
    char p[1100], err[2048];
    snprintf(p, sizeof(p), "%s/state_v1.bin", dir);
    const char* names[] = {"adamw", "lion", "signsgd"};
    for (int k = 0; k < 3; k++) {
        Optimizer o;
        make_opt(&o, names[k], 20 + (uint64_t)k);
        LoopState l = some_loop();
        DataLoaderState pos = some_pos();
        ck_assert_msg(test_run_state_v1_write(p, &l, &o, &pos, err, sizeof(err)) == 0, "%s", err);
        size_t n;
        unsigned char* b = rd_slurp(p, &n);
        ck_assert_uint_eq(n, RUN_STATE_V1_FIXED_BYTES +
                                 sizeof(float) * N_PARAMS * (size_t)o.def->state_per_param + 8);
        int32_t v;
        memcpy(&v, b + 4, 4);
        ck_assert_int_eq(v, 1);
        free(b);
        expect_accept(p, &o); // every field where version 1 keeps it
        optim_free(&o);
    }
    // a version-1 file refused: short arrays, extra bytes, shorter than its fixed part
    Optimizer o;
    make_opt(&o, "adamw", 3);
    LoopState l = some_loop();
    DataLoaderState pos = some_pos();
    ck_assert_msg(test_run_state_v1_write(p, &l, &o, &pos, err, sizeof(err)) == 0, "%s", err);
    size_t n;
    unsigned char* b = rd_slurp(p, &n);
    unsigned char* c = malloc(n + 8);
    memcpy(c, b, n - 8);
    rd_fix_trailer(c, n - 4);
    rd_write(p, c, n - 4);
    expect_reject(p, "section 'optim': truncated while reading the optimizer state", "");
    memcpy(c, b, n - 8);
    memset(c + n - 8, 0, 4);
    rd_fix_trailer(c, n + 4);
    rd_write(p, c, n + 4);
    expect_reject(p, "section 'optim': extra bytes after the optimizer state", "");
    rd_fix_trailer(c, 1100);
    rd_write(p, c, 1100);
    expect_reject(p, "truncated (a version-1 run-state file holds at least 1160 bytes", "1092");
    memcpy(c, b, n - 8);
    c[1024] = 'x'; // another optimizer's name
    rd_fix_trailer(c, n);
    rd_write(p, c, n);
    expect_reject(p, "optimizer state is xdamw", "");
    free(c);
    free(b);
    optim_free(&o);
}
END_TEST

static Suite* run_state_suite(void) {
    Suite* s = suite_create("run_state");
    TCase* tc = tcase_create("files");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_v2_round_trip);
    tcase_add_test(tc, test_v2_small_file_found);
    tcase_add_test(tc, test_v2_rejects);
    tcase_add_test(tc, test_v1_read);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(run_state_suite)
