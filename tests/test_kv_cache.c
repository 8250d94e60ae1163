// tests/test_kv_cache.c: incremental decoding with the key/value cache (model/kv_cache.c,
// attention/decode.c) against the full forward.
//   - every registered variant that declares itself cacheable (attn_decode_exact), under every
//     position encoding it supports (learned, rope, alibi, none, xpos, fire), on a random 2-layer,
//     4-head model: the logits of each cached step equal row t of the full forward over the
//     whole sequence (what generation without the cache computes for that prefix), within KV_TOL
//     of the largest logit (the rounding of one-row products; see KV_TOL);
//   - the same for softmax with qk-norm, the value residual, attnres and delta_attnres routing
//     and attention-only blocks, whose position-wise parts all run inside the step;
//   - every variant that is not cacheable says so, naming itself (kv_cache_supported);
//   - ./generate (greedy and sampled, past the block size where the window slides) prints the
//     same text with the cache as with --no-cache; a non-cacheable model prints one note on
//     stderr and the same text as --no-cache.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "attention/attention.h"
#include "common/util.h"
#include "model/checkpoint.h"
#include "model/gpt2.h"
#include "model/kv_cache.h"
#include "model/sample.h"
#include "tests/model_util.h"
#include "tests/testutil.h"

#define V  64
#define TT 24
// The tolerance, relative to the largest logit. The step runs the same code on the same numbers
// as the full forward's last row, but not bit for bit: OpenBLAS sums a one-row product (the
// step's linear layers, score row and A·V) in another order than a many-row one (measured here:
// a one-row sgemm differs from row t of the same product in the last bits), so the hidden states
// differ in the last bits and the two layers carry that to the logits; under xpos the full
// forward also centres the key scale on its own length (the same scores up to rounding).
// Measured: at most 6e-7 over every variant and encoding below (3e-6 with 2x larger weights); a
// wrong position, bias or key is off by 1e-2 or more (an ALiBi sign flip: 0.08).
#define KV_TOL 2e-5

static const char* const POS[] = {"learned", "rope", "alibi", "none", "xpos", "fire"};
#define NPOS ((int)(sizeof(POS) / sizeof(POS[0])))

// Set up attention and build; 0, or -1 (with err) where the config is refused.
static int build(GPT2* m, const Config* c, char* err, size_t cap) {
    memset(m, 0, sizeof(*m));
    if (gpt2_setup_attention(m, c, err, cap)) return -1;
    GPT2Config g;
    if (gpt2_config_from(&g, c, err, cap)) return -1;
    gpt2_build(m, &g);
    gpt2_init(m, 11);
    Rng r;
    rng_seed(&r, 5);
    for (size_t i = 0; i < m->num_params; i++) // larger, less regular weights: distinct logits
        m->params[i] = m->params[i] * 1.5f + 0.02f * (float)rng_normal(&r);
    gpt2_alloc_acts(m, 1, TT, omp_get_max_threads());
    m->step = -1;
    return 0;
}

static void config(Config* c, const char* attention, const char* pos) {
    test_tiny_config(c, V, 2, 4, 32, TT);
    util_strlcpy(c->attention, attention, sizeof(c->attention));
    util_strlcpy(c->pos_encoding, pos, sizeof(c->pos_encoding));
}

// cached logits of every position against row t of one full forward over all TT positions (row t
// sees positions <= t only: the last row of a forward over that prefix, up to rounding); returns
// the number of positions compared
static int compare(GPT2* m, const char* what) {
    int ids[TT];
    Rng r;
    rng_seed(&r, 77);
    test_random_tokens(ids, TT, V, &r);
    gpt2_forward(m, ids, NULL, 1, TT);
    float* full = mallocCheck(sizeof(float) * (size_t)TT * V);
    for (int t = 0; t < TT; t++)
        memcpy(full + (size_t)t * V, gpt2_logits(m, 0, t), sizeof(float) * V);
    KVCache* kv = kv_cache_new(m, TT);
    for (int t = 0; t < TT; t++) {
        ck_assert_int_eq(kv_cache_len(kv), t);
        const float* step = kv_cache_step(m, kv, ids[t]);
        const float* row = full + (size_t)t * V;
        double scale = 0, diff = 0;
        for (int v = 0; v < V; v++) {
            ck_assert_msg(isfinite(step[v]), "%s: position %d logit %d not finite", what, t, v);
            scale = fmax(scale, fabs(row[v]));
            diff = fmax(diff, fabs((double)step[v] - row[v]));
        }
        ck_assert_msg(diff <= KV_TOL * scale, "%s: position %d: max diff %g (largest logit %g)",
                      what, t, diff, scale);
    }
    free(full);
    kv_cache_free(kv);
    return TT;
}

START_TEST(test_cached_logits_every_variant) {
    omp_set_num_threads(1); // ~300 tiny models: threads only cost here (results do not depend on
                            // the count; the options test below runs on 2)
    int cached = 0, refused = 0, positions = 0;
    for (int i = 0; i < attn_count(); i++) {
        const AttnVariant* v = attn_get(i);
        if (!test_variant_selected(v->name)) continue;
        for (int p = 0; p < NPOS; p++) {
            if (!attn_pos_supported(v, attn_pos_from_name(POS[p]))) continue;
            Config c;
            config(&c, v->name, POS[p]);
            GPT2 m;
            char err[1024], what[128], why[512];
            snprintf(what, sizeof(what), "%s, pos_encoding = %s", v->name, POS[p]);
            ck_assert_msg(build(&m, &c, err, sizeof(err)) == 0, "%s: %s", what, err);
            const int ok = kv_cache_supported(&m, why, sizeof(why));
            ck_assert_int_eq(ok, attn_decode_exact(v, attn_pos_from_name(POS[p])));
            if (ok) {
                positions += compare(&m, what);
                cached++;
            } else { // declared: the reason names the variant
                ck_assert_msg(strstr(why, v->name) != NULL, "%s: %s", what, why);
                ck_assert(v->layer_forward || (v->needs_key_sq && !strcmp(POS[p], "xpos")));
                refused++;
            }
            gpt2_free(&m);
        }
    }
    if (!getenv("ATTNLAB_TEST_VARIANTS") || !*getenv("ATTNLAB_TEST_VARIANTS")) {
        ck_assert_int_ge(cached, 6 * 30); // the row maps, each under every encoding
        ck_assert_int_ge(refused, 10);    // the layer-level variants
    }
    ck_assert_int_eq(positions, cached * TT);
}
END_TEST

// the model options whose work is position-wise run inside the cached step too
START_TEST(test_cached_logits_model_options) {
    omp_set_num_threads(2);
    const char* opts[] = {"qk_norm", "value_residual", "attnres", "delta_attnres", "mlp0"};
    for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
        for (int p = 0; p < 2; p++) {
            Config c;
            config(&c, "softmax", p ? "rope" : "learned");
            if (!strcmp(opts[i], "qk_norm")) c.qk_norm = 1;
            if (!strcmp(opts[i], "value_residual")) c.value_residual = 1;
            if (!strcmp(opts[i], "attnres") || !strcmp(opts[i], "delta_attnres"))
                util_strlcpy(c.residual, opts[i], sizeof(c.residual));
            if (!strcmp(opts[i], "mlp0")) c.mlp = 0;
            GPT2 m;
            char err[1024], what[128];
            snprintf(what, sizeof(what), "softmax, %s, %s", opts[i], POS[p]);
            ck_assert_msg(build(&m, &c, err, sizeof(err)) == 0, "%s: %s", what, err);
            ck_assert(kv_cache_supported(&m, err, sizeof(err)));
            compare(&m, what);
            gpt2_free(&m);
        }
    }
}
END_TEST

// Exit code, stdout and stderr of a shell command (stderr through a file).
static int run_cmd(const char* cmd, char* out, size_t cap, char* errtext, size_t errcap) {
    char full[4096], ep[1100];
    snprintf(ep, sizeof(ep), "%s/kv_stderr.txt", test_tmpdir());
    snprintf(full, sizeof(full), "%s 2>%s", cmd, ep);
    FILE* p = popen(full, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    FILE* f = fopen(ep, "rb");
    ck_assert_ptr_nonnull(f);
    n = fread(errtext, 1, errcap - 1, f);
    errtext[n] = '\0';
    fclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

// a byte-tokenizer checkpoint of a random model with this attention and position encoding
static void write_model(const char* path, const char* attention, const char* pos) {
    Config c;
    test_tiny_config(&c, 257, 2, 4, 32, 16);
    util_strlcpy(c.tokenizer, "byte", sizeof(c.tokenizer));
    util_strlcpy(c.attention, attention, sizeof(c.attention));
    util_strlcpy(c.pos_encoding, pos, sizeof(c.pos_encoding));
    GPT2 m;
    test_build_model(&m, &c, 1, 16, 21);
    for (size_t i = 0; i < m.num_params; i++) // peaked logits: greedy text is not all one token
        m.params[i] *= 5.0f;
    char err[2048];
    char* text = NULL;
    size_t tl = 0;
    FILE* f = open_memstream(&text, &tl);
    ck_assert_int_eq(config_write(&c, f), 0);
    fclose(f);
    ck_assert_msg(ckpt_save_model(&m, path, 0, text, err, sizeof(err)) == 0, "%s", err);
    free(text);
    gpt2_free(&m);
}

// ./generate with and without the cache: the same text; returns 1 when the cached run noted a
// fallback on stderr
static int generate_both(const char* ck, const char* opts) {
    char cmd[3000], a[16384], b[16384], ea[4096], eb[4096];
    snprintf(cmd, sizeof(cmd), "OMP_NUM_THREADS=1 %s/generate --checkpoint %s %s", test_build_dir(),
             ck, opts);
    ck_assert_msg(run_cmd(cmd, a, sizeof(a), ea, sizeof(ea)) == 0, "%s: %s", cmd, ea);
    strncat(cmd, " --no-cache", sizeof(cmd) - strlen(cmd) - 1);
    ck_assert_msg(run_cmd(cmd, b, sizeof(b), eb, sizeof(eb)) == 0, "%s: %s", cmd, eb);
    ck_assert_msg(strstr(a, "---- sample 2 ----") != NULL, "%s", a);
    ck_assert_msg(strcmp(a, b) == 0, "%s\ncached:\n%s\nrecomputed:\n%s", opts, a, b);
    ck_assert_str_eq(eb, ""); // --no-cache never notes anything
    const char* note = strstr(ea, "no key/value cache");
    if (note) ck_assert_ptr_null(strstr(note + 1, "no key/value cache")); // one note per run
    return note != NULL;
}

START_TEST(test_generate_cache_matches_recompute) {
    char ck[1100];
    const char* pos[] = {"learned", "rope", "xpos"};
    for (int p = 0; p < 3; p++) {
        snprintf(ck, sizeof(ck), "%s/kv_%s.bin", test_tmpdir(), pos[p]);
        write_model(ck, "softmax", pos[p]);
        // 40 new tokens after a 6-token prompt: past block_size 16, the window slides
        ck_assert_int_eq(generate_both(ck, "--n 2 --tokens 40 --temperature 0 --prompt Hello!"), 0);
        if (p == 1) // sampled: the same draws from the same logits
            ck_assert_int_eq(generate_both(ck, "--n 2 --tokens 12 --temperature 0.9 --top-k 20"),
                             0);
    }
    // a layer-level variant: one note, the recomputed text
    snprintf(ck, sizeof(ck), "%s/kv_gated.bin", test_tmpdir());
    write_model(ck, "gated", "rope");
    ck_assert_int_eq(generate_both(ck, "--n 2 --tokens 10 --temperature 0"), 1);
}
END_TEST

// the cached generator itself: greedy tokens equal gpt2_generate's, and the step is restored
START_TEST(test_generate_cached_greedy) {
    Config c;
    config(&c, "softmax", "alibi");
    GPT2 m;
    char err[512];
    ck_assert_msg(build(&m, &c, err, sizeof(err)) == 0, "%s", err);
    KVCache* kv = kv_cache_new(&m, TT);
    int a[TT + 20] = {3, 17, 5}, b[TT + 20] = {3, 17, 5};
    Rng r1, r2;
    rng_seed(&r1, 4);
    rng_seed(&r2, 4);
    m.step = 9;
    int na = gpt2_generate_cached(&m, kv, a, 3, TT + 17, 0.0f, 0, -1, &r1);
    ck_assert_int_eq(m.step, 9);
    int nb = gpt2_generate(&m, b, 3, TT + 17, 0.0f, 0, -1, &r2);
    ck_assert_int_eq(na, TT + 20);
    ck_assert_int_eq(nb, na);
    ck_assert(memcmp(a, b, sizeof(a)) == 0);
    ck_assert_int_eq(kv_cache_len(kv), TT); // filled, then the window slid past it
    kv_cache_free(kv);
    gpt2_free(&m);
}
END_TEST

static Suite* kv_cache_suite(void) {
    Suite* s = suite_create("kv_cache");
    TCase* tc = tcase_create("logits");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_cached_logits_every_variant);
    tcase_add_test(tc, test_cached_logits_model_options);
    suite_add_tcase(s, tc);
    tc = tcase_create("generate");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_generate_cached_greedy);
    tcase_add_test(tc, test_generate_cache_matches_recompute);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(kv_cache_suite)
