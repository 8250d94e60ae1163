// tests/test_interop.c: Hugging Face and llm.c interop. Export -> import round trips give
// identical logits; the safetensors layout (transposes, names, padding, metadata) is checked
// element by element; F16/BF16 conversion against hand-encoded values; malformed files are
// rejected with messages naming the file; and the validation loss of attnlab agrees with an
// independent numpy GPT-2 (tests/ref/ref_gpt2.py) on the exported safetensors and on an llm.c file.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "data/shard.h"
#include "model/checkpoint.h"
#include "model/hf.h"
#include "tests/model_util.h"
#include "tests/testutil.h"

#define PY "/usr/bin/python3"

static void build(GPT2* m, const char* attention, int L, int NH, int C, int maxT, int V) {
    Config c;
    char err[2048];
    config_defaults(&c);
    c.n_layer = L;
    c.n_head = NH;
    c.n_embd = C;
    c.block_size = maxT;
    c.vocab_size = V;
    util_strlcpy(c.attention, attention, sizeof(c.attention));
    memset(m, 0, sizeof(*m));
    ck_assert_msg(gpt2_setup_attention(m, &c, err, sizeof(err)) == 0, "%s", err);
    GPT2Config gc;
    ck_assert_msg(gpt2_config_from(&gc, &c, err, sizeof(err)) == 0, "%s", err);
    gpt2_build(m, &gc);
    gpt2_init(m, 1);
}

// Random weights of std `s` everywhere (padded vocabulary rows stay zero).
static void randomize(GPT2* m, float s, uint64_t seed) {
    Rng r;
    rng_seed(&r, seed);
    fill_normal(m->params, m->num_params, s, &r);
    size_t V = (size_t)m->cfg.vocab_size, C = (size_t)m->cfg.n_embd;
    memset(m->params + m->specs[P_WTE].offset + V * C, 0,
           sizeof(float) * ((size_t)m->cfg.padded_vocab - V) * C);
}

static void forward_tokens(GPT2* m, int B, int T, uint64_t seed, int* ids) {
    Rng r;
    rng_seed(&r, seed);
    for (int i = 0; i < B * T; i++)
        ids[i] = (int)(rng_u64(&r) % (uint64_t)m->cfg.vocab_size);
    gpt2_forward(m, ids, NULL, B, T);
}

static int logits_equal(const GPT2* a, const GPT2* b, int B, int T) {
    size_t n = (size_t)B * T * (size_t)a->cfg.padded_vocab;
    return memcmp(a->logits, b->logits, sizeof(float) * n) == 0;
}

START_TEST(test_hf_roundtrip_identical_logits) {
    const char* dir = test_tmpdir();
    char out[1100], err[2048];
    snprintf(out, sizeof(out), "%s/hf", dir);
    GPT2 a, b;
    build(&a, "softmax", 2, 2, 16, 8, 300);
    randomize(&a, 0.2f, 7);
    ck_assert(hf_is_plain_gpt2(&a));
    ck_assert_msg(hf_export(&a, out, NULL, err, sizeof(err)) == 0, "%s", err);
    GPT2Config fc;
    char att[64];
    ck_assert_msg(hf_read_config(out, &fc, att, sizeof(att), err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(fc.n_layer, 2);
    ck_assert_int_eq(fc.n_head, 2);
    ck_assert_int_eq(fc.n_embd, 16);
    ck_assert_int_eq(fc.block_size, 8);
    ck_assert_int_eq(fc.vocab_size, 300);
    ck_assert_int_eq(fc.padded_vocab, 384);
    ck_assert_str_eq(att, "softmax");
    build(&b, "softmax", 2, 2, 16, 8, 300);
    ck_assert_msg(hf_load(&b, out, err, sizeof(err)) == 0, "%s", err);
    ck_assert(memcmp(a.params, b.params, sizeof(float) * a.num_params) == 0);
    int ids[16];
    gpt2_alloc_acts(&a, 2, 8, 1);
    gpt2_alloc_acts(&b, 2, 8, 1);
    forward_tokens(&a, 2, 8, 3, ids);
    forward_tokens(&b, 2, 8, 3, ids);
    ck_assert(logits_equal(&a, &b, 2, 8));
    gpt2_free(&a);
    gpt2_free(&b);
}
END_TEST

// The layout of the file, read back tensor by tensor: names, shapes (Conv1D weights (in, out)),
// unpadded vocabulary, header alignment and metadata.
START_TEST(test_hf_layout) {
    const char* dir = test_tmpdir();
    char out[1100], path[1200], err[2048];
    snprintf(out, sizeof(out), "%s/hf", dir);
    GPT2 a;
    const int L = 2, C = 16, V = 300;
    build(&a, "softmax", L, 2, C, 8, V);
    randomize(&a, 0.2f, 11);
    ck_assert_msg(hf_export(&a, out, NULL, err, sizeof(err)) == 0, "%s", err);
    snprintf(path, sizeof(path), "%s/model.safetensors", out);
    size_t len;
    char* raw = util_read_file(path, &len, err, sizeof(err));
    ck_assert_ptr_nonnull(raw);
    uint64_t hl;
    memcpy(&hl, raw, 8);
    ck_assert_uint_eq(hl % 8, 0);
    ck_assert(strncmp(raw + 8, "{\"__metadata__\":{\"format\":\"pt\"}", 31) == 0);
    ck_assert_ptr_null(strstr(raw + 8, "lm_head"));
    ck_assert_ptr_null(strstr(raw + 8, "attnlab"));
    free(raw);
    SafeTensors st;
    ck_assert_msg(st_open(&st, path, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(st.n, 2 + 12 * L + 2);
    int i = st_find(&st, "transformer.h.1.attn.c_attn.weight");
    ck_assert_int_ge(i, 0);
    ck_assert_int_eq(st.t[i].ndim, 2);
    ck_assert_uint_eq(st.t[i].shape[0], C);
    ck_assert_uint_eq(st.t[i].shape[1], 3 * C);
    float* w = mallocCheck(sizeof(float) * 4 * C * C);
    ck_assert(st_read_f32(&st, i, w, err, sizeof(err)) == 0);
    const float* q = gpt2_tensor(&a, a.params, P_QKVW, 1); // (3C, C): q[o*C + k]
    for (int k = 0; k < C; k++)
        for (int o = 0; o < 3 * C; o++)
            ck_assert(w[k * 3 * C + o] == q[o * C + k]);
    i = st_find(&st, "transformer.h.0.mlp.c_proj.weight");
    ck_assert_uint_eq(st.t[i].shape[0], 4 * C);
    ck_assert_uint_eq(st.t[i].shape[1], C);
    ck_assert(st_read_f32(&st, i, w, err, sizeof(err)) == 0);
    const float* p = gpt2_tensor(&a, a.params, P_FCPROJW, 0); // (C, 4C)
    for (int k = 0; k < 4 * C; k++)
        for (int o = 0; o < C; o++)
            ck_assert(w[k * C + o] == p[o * 4 * C + k]);
    i = st_find(&st, "transformer.wte.weight");
    ck_assert_uint_eq(st.t[i].shape[0], V);
    ck_assert_uint_eq(st.t[i].shape[1], C);
    ck_assert_int_ge(st_find(&st, "transformer.ln_f.bias"), 0);
    ck_assert_int_ge(st_find(&st, "transformer.h.1.ln_2.weight"), 0);
    st_close(&st);
    free(w);
    // config.json keys from_pretrained reads
    snprintf(path, sizeof(path), "%s/config.json", out);
    char* cj = util_read_file(path, &len, err, sizeof(err));
    ck_assert_ptr_nonnull(cj);
    ck_assert_ptr_nonnull(strstr(cj, "\"model_type\": \"gpt2\""));
    ck_assert_ptr_nonnull(strstr(cj, "\"GPT2LMHeadModel\""));
    ck_assert_ptr_nonnull(strstr(cj, "\"activation_function\": \"gelu_new\""));
    ck_assert_ptr_nonnull(strstr(cj, "\"n_embd\": 16"));
    free(cj);
    gpt2_free(&a);
}
END_TEST

// The original GPT-2 checkpoint's unprefixed names load the same.
START_TEST(test_hf_unprefixed_names) {
    const char* dir = test_tmpdir();
    char out[1100], path[1200], err[2048];
    snprintf(out, sizeof(out), "%s/hf", dir);
    GPT2 a, b;
    build(&a, "softmax", 2, 2, 16, 8, 300);
    randomize(&a, 0.2f, 5);
    ck_assert(hf_export(&a, out, NULL, err, sizeof(err)) == 0);
    snprintf(path, sizeof(path), "%s/model.safetensors", out);
    size_t len;
    char* raw = util_read_file(path, &len, err, sizeof(err));
    uint64_t hl;
    memcpy(&hl, raw, 8);
    // drop every "transformer." in the header, keep its length with trailing spaces
    char* h = raw + 8;
    size_t w = 0;
    for (size_t r = 0; r < hl;) {
        if (hl - r >= 12 && memcmp(h + r, "transformer.", 12) == 0) {
            r += 12;
            continue;
        }
        h[w++] = h[r++];
    }
    while (w < hl)
        h[w++] = ' ';
    ck_assert_ptr_null(strstr(raw + 8, "transformer."));
    FILE* f = fopen(path, "wb");
    fwrite(raw, 1, len, f);
    fclose(f);
    free(raw);
    build(&b, "softmax", 2, 2, 16, 8, 300);
    ck_assert_msg(hf_load(&b, out, err, sizeof(err)) == 0, "%s", err);
    ck_assert(memcmp(a.params, b.params, sizeof(float) * a.num_params) == 0);
    gpt2_free(&a);
    gpt2_free(&b);
}
END_TEST

// A variant with its own tensors: tagged metadata, attnlab.* tensors, round trip identical.
START_TEST(test_hf_variant_tagged) {
    const char* dir = test_tmpdir();
    char out[1100], path[1200], err[2048];
    snprintf(out, sizeof(out), "%s/hf", dir);
    GPT2 a, b;
    build(&a, "ssmax", 2, 2, 16, 8, 300);
    ck_assert(!hf_is_plain_gpt2(&a));
    randomize(&a, 0.1f, 9);
    ck_assert(hf_export(&a, out, NULL, err, sizeof(err)) == 0);
    GPT2Config fc;
    char att[64];
    ck_assert(hf_read_config(out, &fc, att, sizeof(att), err, sizeof(err)) == 0);
    ck_assert_str_eq(att, "ssmax");
    snprintf(path, sizeof(path), "%s/model.safetensors", out);
    SafeTensors st;
    ck_assert(st_open(&st, path, err, sizeof(err)) == 0);
    ck_assert_str_eq(st.attention, "ssmax");
    int nvar = 0;
    for (int i = 0; i < st.n; i++)
        nvar += strncmp(st.t[i].name, "attnlab.", 8) == 0;
    ck_assert_int_eq(nvar, a.nspecs - GPT2_NUM_LLMC);
    ck_assert_int_gt(nvar, 0);
    st_close(&st);
    build(&b, "ssmax", 2, 2, 16, 8, 300);
    ck_assert_msg(hf_load(&b, out, err, sizeof(err)) == 0, "%s", err);
    ck_assert(memcmp(a.params, b.params, sizeof(float) * a.num_params) == 0);
    gpt2_free(&a);
    gpt2_free(&b);
}
END_TEST

START_TEST(test_llmc_roundtrip) {
    const char* dir = test_tmpdir();
    char path[1100], err[2048];
    snprintf(path, sizeof(path), "%s/model.llmc.bin", dir);
    GPT2 a, b;
    build(&a, "softmax", 2, 2, 16, 8, 300);
    randomize(&a, 0.2f, 13);
    ck_assert(llmc_save(&a, path, err, sizeof(err)) == 0);
    struct stat sb;
    stat(path, &sb);
    size_t n = a.specs[GPT2_NUM_LLMC - 1].offset + a.specs[GPT2_NUM_LLMC - 1].size;
    ck_assert_int_eq((long long)sb.st_size, (long long)(1024 + 4 * n));
    build(&b, "softmax", 2, 2, 16, 8, 300);
    ck_assert_msg(llmc_load(&b, path, err, sizeof(err)) == 0, "%s", err);
    ck_assert(memcmp(a.params, b.params, sizeof(float) * n) == 0);
    int ids[16];
    gpt2_alloc_acts(&a, 2, 8, 1);
    gpt2_alloc_acts(&b, 2, 8, 1);
    forward_tokens(&a, 2, 8, 4, ids);
    forward_tokens(&b, 2, 8, 4, ids);
    ck_assert(logits_equal(&a, &b, 2, 8));
    gpt2_free(&a);
    gpt2_free(&b);
}
END_TEST

// ---- hand-made safetensors files

static void write_st(const char* path, const char* header, const void* data, size_t n) {
    size_t hl = strlen(header);
    uint64_t l = hl;
    FILE* f = fopen(path, "wb");
    fwrite(&l, 8, 1, f);
    fwrite(header, 1, hl, f);
    fwrite(data, 1, n, f);
    fclose(f);
}

START_TEST(test_st_f16_bf16) {
    char path[1100], err[2048];
    snprintf(path, sizeof(path), "%s/h.safetensors", test_tmpdir());
    // F16: 1, -2, 0.5, 65504, 2^-24 (smallest subnormal); BF16: 1, -3
    uint16_t d[7] = {0x3C00, 0xC000, 0x3800, 0x7BFF, 0x0001, 0x3F80, 0xC040};
    write_st(path,
             "{\"a\":{\"dtype\":\"F16\",\"shape\":[5],\"data_offsets\":[0,10]},"
             "\"b\":{\"dtype\":\"BF16\",\"shape\":[1,2],\"data_offsets\":[10,14]}}",
             d, sizeof(d));
    SafeTensors st;
    ck_assert_msg(st_open(&st, path, err, sizeof(err)) == 0, "%s", err);
    float v[5];
    ck_assert(st_read_f32(&st, st_find(&st, "a"), v, err, sizeof(err)) == 0);
    ck_assert(v[0] == 1.0f && v[1] == -2.0f && v[2] == 0.5f && v[3] == 65504.0f);
    ck_assert(v[4] == ldexpf(1.0f, -24));
    ck_assert(st_read_f32(&st, st_find(&st, "b"), v, err, sizeof(err)) == 0);
    ck_assert(v[0] == 1.0f && v[1] == -3.0f);
    st_close(&st);
}
END_TEST

static void expect_reject(const char* path, const char* what) {
    SafeTensors st;
    char err[2048] = "";
    ck_assert_msg(st_open(&st, path, err, sizeof(err)) != 0, "accepted: %s", what);
    ck_assert_msg(strstr(err, path) != NULL, "%s: message does not name the file: %s", what, err);
}

START_TEST(test_st_malformed_rejected) {
    char path[1100], err[2048];
    snprintf(path, sizeof(path), "%s/bad.safetensors", test_tmpdir());
    float d[4] = {1, 2, 3, 4};
    const char* ok = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}";
    write_st(path, ok, d, 16);
    SafeTensors st;
    FILE* f;
    ck_assert_msg(st_open(&st, path, err, sizeof(err)) == 0, "%s", err);
    st_close(&st);
    write_st(path, ok, d, 12); // truncated data
    expect_reject(path, "truncated data");
    ck_assert(st_open(&st, path, err, sizeof(err)) != 0 && strstr(err, "outside") != NULL);
    write_st(path, ok, d, 16);
    f = fopen(path, "ab"); // trailing garbage after the last tensor
    fwrite("xx", 1, 2, f);
    fclose(f);
    expect_reject(path, "trailing bytes");
    ck_assert(st_open(&st, path, err, sizeof(err)) != 0 && strstr(err, "cover") != NULL);
    f = fopen(path, "wb"); // only 5 bytes
    fwrite("\x10\0\0\0\0", 1, 5, f);
    fclose(f);
    expect_reject(path, "shorter than the length field");
    f = fopen(path, "wb"); // header length beyond the file
    uint64_t big = 4096;
    fwrite(&big, 8, 1, f);
    fwrite("{}", 1, 2, f);
    fclose(f);
    expect_reject(path, "header length beyond the file");
    ck_assert(st_open(&st, path, err, sizeof(err)) != 0 && strstr(err, "beyond") != NULL);
    write_st(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]", d, 8);
    expect_reject(path, "unterminated JSON");
    write_st(path, "{\"a\":{\"dtype\":\"F32\" \"shape\":[2],\"data_offsets\":[0,8]}}", d, 8);
    expect_reject(path, "missing comma");
    ck_assert(st_open(&st, path, err, sizeof(err)) != 0 && strstr(err, "JSON") != NULL);
    write_st(path,
             "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
             "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
             d, 12);
    expect_reject(path, "overlapping offsets");
    ck_assert(st_open(&st, path, err, sizeof(err)) != 0 && strstr(err, "overlap") != NULL);
    write_st(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", d, 16);
    expect_reject(path, "gap before the first tensor");
    write_st(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[200],\"data_offsets\":[0,800]}}", d, 8);
    expect_reject(path, "offsets out of range");
    ck_assert(st_open(&st, path, err, sizeof(err)) != 0 && strstr(err, "outside") != NULL);
    write_st(path, "{\"a\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", d, 8);
    expect_reject(path, "unknown dtype");
    ck_assert(st_open(&st, path, err, sizeof(err)) != 0 && strstr(err, "F33") != NULL);
    // integer and boolean tensors (attention-mask buffers) are valid but not readable as floats
    write_st(path,
             "{\"a\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]},"
             "\"m\":{\"dtype\":\"BOOL\",\"shape\":[2,2],\"data_offsets\":[8,12]}}",
             d, 12);
    ck_assert_msg(st_open(&st, path, err, sizeof(err)) == 0, "%s", err);
    ck_assert(st_read_f32(&st, st_find(&st, "a"), (float*)d, err, sizeof(err)) != 0);
    ck_assert_msg(strstr(err, path) && strstr(err, "I64"), "%s", err);
    st_close(&st);
    d[0] = 1, d[1] = 2, d[2] = 3, d[3] = 4;
    write_st(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", d, 8);
    expect_reject(path, "shape does not match the byte count");
    write_st(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", d, 8);
    expect_reject(path, "negative shape");
    write_st(path,
             "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
             "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
             d, 16);
    expect_reject(path, "duplicate name");
    write_st(path, "[1,2,3]", d, 0);
    expect_reject(path, "not an object");
}
END_TEST

// Valid files that do not fit the model: wrong shape, missing tensor, wrong layer count.
START_TEST(test_hf_shape_mismatch_rejected) {
    const char* dir = test_tmpdir();
    char out[1100], err[2048];
    snprintf(out, sizeof(out), "%s/hf", dir);
    GPT2 a, b;
    build(&a, "softmax", 2, 2, 16, 8, 300);
    ck_assert(hf_export(&a, out, NULL, err, sizeof(err)) == 0);
    {
        char path[1300];
        snprintf(path, sizeof(path), "%s/model.safetensors", out);
        size_t len;
        char* raw = util_read_file(path, &len, err, sizeof(err));
        char* w = strstr(raw + 8, "\"transformer.wpe.weight\":{\"dtype\":\"F32\"");
        ck_assert_ptr_nonnull(w);
        memcpy(strstr(w, "F32"), "I32", 3);
        char bad[1100];
        snprintf(bad, sizeof(bad), "%s/bad", dir);
        util_mkdirs(bad, err, sizeof(err));
        snprintf(path, sizeof(path), "%s/model.safetensors", bad);
        FILE* f = fopen(path, "wb");
        fwrite(raw, 1, len, f);
        fclose(f);
        free(raw);
        build(&b, "softmax", 2, 2, 16, 8, 300);
        ck_assert(hf_load(&b, bad, err, sizeof(err)) != 0);
        ck_assert_msg(strstr(err, path) && strstr(err, "transformer.wpe.weight") &&
                          strstr(err, "I32"),
                      "%s", err);
        gpt2_free(&b);
    }
    build(&b, "softmax", 2, 2, 32, 8, 300);
    ck_assert(hf_load(&b, out, err, sizeof(err)) != 0);
    ck_assert_msg(strstr(err, "model.safetensors") && strstr(err, "has shape"), "%s", err);
    gpt2_free(&b);
    build(&b, "softmax", 1, 2, 16, 8, 300); // the file has layer 1, the model has one layer
    ck_assert(hf_load(&b, out, err, sizeof(err)) != 0);
    ck_assert_msg(strstr(err, "model.safetensors") && strstr(err, "layer 1"), "%s", err);
    gpt2_free(&b);
    build(&b, "softmax", 3, 2, 16, 8, 300); // layer 2 is missing from the file
    ck_assert(hf_load(&b, out, err, sizeof(err)) != 0);
    ck_assert_msg(strstr(err, "h.2.") && strstr(err, "missing"), "%s", err);
    gpt2_free(&b);
    gpt2_free(&a);
}
END_TEST

// ---- agreement with the independent numpy reference

static int have_numpy(void) {
    return system(PY " -c 'import numpy' >/dev/null 2>&1") == 0;
}

// tests/ref/ref_gpt2.py relative to the repository root.
static void repo_path(char* out, size_t cap, const char* rel) {
    snprintf(out, cap, "%s/%s", test_repo_root(), rel);
}

static double ref_loss(const char* model, const char* data, int B, int T, int n) {
    char script[1100], cmd[4096];
    repo_path(script, sizeof(script), "tests/ref/ref_gpt2.py");
    snprintf(cmd, sizeof(cmd), PY " %s --model %s --data '%s' -B %d -T %d --batches %d", script,
             model, data, B, T, n);
    FILE* p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    double v = NAN;
    char line[256];
    while (fgets(line, sizeof(line), p))
        sscanf(line, "val_loss %lf", &v);
    ck_assert_int_eq(pclose(p), 0);
    return v;
}

// attnlab's validation loss on a model loaded with init_from: ./train with max_steps = 0
// evaluates only, and writes the loss to metrics.jsonl (%.9g: the float exactly).
static float attnlab_loss(const char* init_from, const char* data, int B, int T, int n) {
    Config c;
    char err[2048];
    config_defaults(&c);
    c.n_layer = 2;
    c.n_head = 2;
    c.n_embd = 32;
    c.block_size = 32;
    c.batch_size = B;
    c.seq_len = T;
    c.max_steps = 0;
    c.eval_steps = n;
    c.threads = 2;
    util_strlcpy(c.val_data, data, sizeof(c.val_data));
    util_strlcpy(c.init_from, init_from, sizeof(c.init_from));
    snprintf(c.out_dir, sizeof(c.out_dir), "%s/run", test_tmpdir());
    ck_assert_msg(config_validate(&c, err, sizeof(err)) == 0, "%s", err);
    char* se = NULL;
    int rc = test_train(&c, &se);
    ck_assert_msg(rc == 0, "./train exited %d: %s", rc, se);
    free(se);
    char p[1200];
    size_t len;
    snprintf(p, sizeof(p), "%s/metrics.jsonl", c.out_dir);
    char* text = util_read_file(p, &len, err, sizeof(err));
    ck_assert_msg(text != NULL, "%s", err);
    const char* vl = strstr(text, "\"val_loss\":");
    ck_assert_msg(vl != NULL, "%s: no val_loss record", p);
    float v = strtof(vl + 11, NULL);
    free(text);
    return v;
}

// init_from a file whose sizes differ from the config: ./train refuses with exit 2 before writing
// anything, naming the file and the file's sizes (llm.c and HF readers share the check).
START_TEST(test_init_from_size_mismatch) {
    const char* dir = test_tmpdir();
    char llmc[1100], hf[1100], shard[1100], err[2048];
    snprintf(llmc, sizeof(llmc), "%s/m.llmc.bin", dir);
    snprintf(hf, sizeof(hf), "%s/hf", dir);
    snprintf(shard, sizeof(shard), "%s/val_000000.bin", dir);
    GPT2 a;
    build(&a, "softmax", 2, 2, 32, 32, 300);
    ck_assert_msg(llmc_save(&a, llmc, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(hf_export(&a, hf, NULL, err, sizeof(err)) == 0, "%s", err);
    gpt2_free(&a);
    uint16_t toks[256];
    for (int i = 0; i < 256; i++)
        toks[i] = (uint16_t)(i % 251);
    ck_assert(shard_write(shard, toks, 256, err, sizeof(err)) == 0);
    const char* src[2] = {"llmc:", "hf:"};
    const char* want[2] = {"llm.c model has n_layer=2", "config.json: model has n_layer=2"};
    for (int k = 0; k < 2; k++) {
        Config c;
        config_defaults(&c);
        c.n_layer = 1; // the files have 2
        c.n_head = 2;
        c.n_embd = 32;
        c.block_size = 32;
        c.vocab_size = 300;
        util_strlcpy(c.tokenizer, "byte", sizeof(c.tokenizer));
        c.batch_size = 1;
        c.seq_len = 16;
        c.max_steps = 0;
        util_strlcpy(c.val_data, shard, sizeof(c.val_data));
        util_strlcpy(c.train_data, shard, sizeof(c.train_data));
        char from[1200];
        snprintf(from, sizeof(from), "%s%s", src[k], k ? hf : llmc);
        util_strlcpy(c.init_from, from, sizeof(c.init_from));
        snprintf(c.out_dir, sizeof(c.out_dir), "%s/run%d", dir, k);
        ck_assert_msg(config_validate(&c, err, sizeof(err)) == 0, "%s", err);
        char* se = NULL;
        ck_assert_int_eq(test_train(&c, &se), 2);
        ck_assert_msg(strstr(se, want[k]) && strstr(se, "set these keys to match") &&
                          strstr(se, k ? hf : llmc),
                      "%s", se);
        free(se);
        struct stat st;
        ck_assert_msg(stat(c.out_dir, &st) != 0, "%s was created", c.out_dir);
    }
}
END_TEST

START_TEST(test_numpy_reference_agrees) {
    ck_assert_msg(have_numpy(), PY " with numpy is required for the independent reference: "
                                   "sudo apt-get install python3-numpy (or bash scripts/deps)");
    const char* dir = test_tmpdir();
    char shard[1100], hf[1100], llmc[1100], err[2048];
    snprintf(shard, sizeof(shard), "%s/val_000000.bin", dir);
    snprintf(hf, sizeof(hf), "%s/hf", dir);
    snprintf(llmc, sizeof(llmc), "%s/m.llmc.bin", dir);
    const int B = 2, T = 16, NB = 3, V = 50257;
    size_t ntok = (size_t)B * T * NB + 40;
    uint16_t* toks = mallocCheck(sizeof(uint16_t) * ntok);
    Rng r;
    rng_seed(&r, 21);
    for (size_t i = 0; i < ntok; i++)
        toks[i] = (uint16_t)(rng_u64(&r) % V);
    ck_assert(shard_write(shard, toks, ntok, err, sizeof(err)) == 0);
    free(toks);
    GPT2 a;
    build(&a, "softmax", 2, 2, 32, 32, V);
    randomize(&a, 0.4f, 17);                // far from uniform: the loss differs clearly from ln V
    for (int s = 0; s < GPT2_NUM_LLMC; s++) // LayerNorm gains around 1
        if (s == P_LN1W || s == P_LN2W || s == P_LNFW)
            for (size_t k = 0; k < a.specs[s].size; k++)
                a.params[a.specs[s].offset + k] += 1.0f;
    ck_assert(hf_export(&a, hf, NULL, err, sizeof(err)) == 0);
    ck_assert(llmc_save(&a, llmc, err, sizeof(err)) == 0);
    gpt2_free(&a);
    char init[1200];
    snprintf(init, sizeof(init), "hf:%s", hf);
    float ours_hf = attnlab_loss(init, shard, B, T, NB);
    snprintf(init, sizeof(init), "llmc:%s", llmc);
    float ours_llmc = attnlab_loss(init, shard, B, T, NB);
    double ref_hf = ref_loss(hf, shard, B, T, NB);
    double ref_llmc = ref_loss(llmc, shard, B, T, NB);
    printf("val loss: attnlab hf %.6f llmc %.6f | numpy hf %.6f llmc %.6f\n", ours_hf, ours_llmc,
           ref_hf, ref_llmc);
    ck_assert(fabs(log((double)V) - ref_hf) > 0.5); // not a trivial uniform prediction
    ck_assert_msg(fabs(ours_hf - ref_hf) < 1e-3, "hf: attnlab %f numpy %f", ours_hf, ref_hf);
    ck_assert_msg(fabs(ours_llmc - ref_llmc) < 1e-3, "llmc: attnlab %f numpy %f", ours_llmc,
                  ref_llmc);
}
END_TEST

// The ./export tool: llm.c file -> hf directory -> identical parameters; bad usage exits 2.
START_TEST(test_export_tool) {
    const char* dir = test_tmpdir();
    char exe[1100], llmc[1100], hf[1100], cmd[4096], err[2048];
    snprintf(exe, sizeof(exe), "%s/export", test_build_dir());
    snprintf(llmc, sizeof(llmc), "%s/in.llmc.bin", dir);
    snprintf(hf, sizeof(hf), "%s/hf_out", dir);
    GPT2 a, b;
    build(&a, "softmax", 2, 2, 16, 8, 300);
    randomize(&a, 0.2f, 23);
    ck_assert(llmc_save(&a, llmc, err, sizeof(err)) == 0);
    snprintf(cmd, sizeof(cmd),
             "%s --checkpoint %s --format hf --out %s --no-tokenizer "
             ">/dev/null 2>&1",
             exe, llmc, hf);
    ck_assert_int_eq(WEXITSTATUS(system(cmd)), 0);
    build(&b, "softmax", 2, 2, 16, 8, 300);
    ck_assert_msg(hf_load(&b, hf, err, sizeof(err)) == 0, "%s", err);
    ck_assert(memcmp(a.params, b.params, sizeof(float) * a.num_params) == 0);
    snprintf(cmd, sizeof(cmd), "%s --checkpoint %s >/dev/null 2>&1", exe, llmc);
    ck_assert_int_eq(WEXITSTATUS(system(cmd)), 2);
    snprintf(cmd, sizeof(cmd), "%s --checkpoint %s --format onnx --out x >/dev/null 2>&1", exe,
             llmc);
    ck_assert_int_eq(WEXITSTATUS(system(cmd)), 2);
    snprintf(cmd, sizeof(cmd),
             "%s --checkpoint %s/missing.bin --format hf --out x >/dev/null "
             "2>&1",
             exe, dir);
    ck_assert_int_eq(WEXITSTATUS(system(cmd)), 2);
    gpt2_free(&a);
    gpt2_free(&b);
}
END_TEST

static Suite* interop_suite(void) {
    Suite* s = suite_create("interop");
    TCase* tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_hf_roundtrip_identical_logits);
    tcase_add_test(tc, test_hf_layout);
    tcase_add_test(tc, test_init_from_size_mismatch);
    tcase_add_test(tc, test_hf_unprefixed_names);
    tcase_add_test(tc, test_hf_variant_tagged);
    tcase_add_test(tc, test_llmc_roundtrip);
    tcase_add_test(tc, test_st_f16_bf16);
    tcase_add_test(tc, test_st_malformed_rejected);
    tcase_add_test(tc, test_hf_shape_mismatch_rejected);
    tcase_add_test(tc, test_numpy_reference_agrees);
    tcase_add_test(tc, test_export_tool);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(interop_suite)
