// tests/test_ref_model.c: the whole GPT-2 forward against the independent float64 numpy model
// tests/ref/ref_gpt2.py (--npy-dir), whose attention layers come from tests/ref/ref_layers.py. The
// model's parameters are written as .npy files with a model.json of the resolved per-layer
// attention (variant, hyperparameters, inner map, the layer's row parameters taken from attnp
// with its (L, NH, maxP) stride, its layer tensors, and the residual-path keys with their tensors:
// residual = attnres | delta_attnres with resid.query, value_residual with its lambdas); the
// logits of every position are compared
// (not only the loss): max |C - ref| / max(1, max |ref|) <= TOL.
//
// Models (2 layers, 2 heads, n_embd 32, vocab 97 padded to 128, B = 2, T = 24): softmax under
// every position encoding (learned, rope, alibi, none), and variants with learnable parameters:
// gated (layer tensors) mixed with ssmax (per-head attnp parameters, a different P per layer),
// ssmax as gated's inner map, asentmax, ssa with its value temperature, boosted, and sigmoid
// with a learnable bias (P = 1) next to ssmax (P = 2), so that attnp's stride maxP matters;
// attention-only blocks (mlp = 0) with softmax and with ssmax/gated; pos_encoding = fire (its
// per-layer vector written as L<l>.fire, layer 1's threshold L moved inside the rows so that the
// interpolated branch t > L is used) under softmax and under diff/lucid; mta at its defaults
// (layers 0, 1 have no convolutions: head mixings, group norm, gate) under rope and, with its
// convolutions in layer 1 (attn.conv_first = 1) and the depth rescale, next to softmax under
// alibi; diff
// next to lucid under rope (both halves rotated as heads of their own; the preconditioner on the
// rotated keys); qk_norm = 1 (both kinds, its gains written as qk_norm.q_gain / qk_norm.k_gain)
// under learned, rope, xpos, alibi (with value_residual), fire and none, on softmax and on
// ssmax/gated, diff, deltanet and mta layers.
// Parameters are the GPT-2 init plus N(0, 0.1) noise (N(0, 0.4) on the MLP input weights, so the
// GELU's cubic term matters); the tolerance is tight enough that a GELU constant 0.05 instead of
// 0.044715 or a LayerNorm epsilon 1e-3 instead of 1e-5 in model/layers.c fails (docs/testing.md).
// A missing /usr/bin/python3 or numpy fails with the install line.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/npy.h"
#include "common/util.h"
#include "model/gpt2.h"
#include "tests/testutil.h"

#define PY  "/usr/bin/python3"
#define TOL 1e-5 // float forward vs float64; measured worst case ~1e-6 (docs/testing.md)

static int have_numpy(void) {
    return system(PY " -c 'import numpy' >/dev/null 2>&1") == 0;
}

static void choice_word(char* out, size_t cap, const char* choices, int idx) {
    const char* p = choices;
    for (int i = 0; i < idx && p; i++) {
        p = strchr(p, '|');
        if (p) p++;
    }
    ck_assert_msg(p != NULL, "choice %d of %s", idx, choices);
    size_t len = strcspn(p, "|");
    if (len >= cap) len = cap - 1;
    memcpy(out, p, len);
    out[len] = '\0';
}

static void write_hp(FILE* f, const AttnVariant* v, const AttnHParams* hp) {
    fputc('{', f);
    for (int i = 0; i < v->n_hparams; i++) {
        const AttnHParamSpec* s = &v->hparams[i];
        if (i) fputc(',', f);
        if (s->choices) {
            char w[64];
            choice_word(w, sizeof(w), s->choices, (int)hp->v[i]);
            fprintf(f, "\"%s\":\"%s\"", s->name, w);
        } else {
            fprintf(f, "\"%s\":%.9g", s->name, (double)hp->v[i]);
        }
    }
    fputc('}', f);
}

static void save(const char* dir, const char* name, const float* x, const int* shape, int ndim) {
    char path[32768], err[512]; // dir is one of the test's directory names (< 600 bytes)
    snprintf(path, sizeof(path), "%s/%s.npy", dir, name);
    ck_assert_msg(npy_write(path, x, shape, ndim, 0, err, sizeof(err)) == 0, "%s", err);
}

typedef struct {
    const char* attention;
    const char* pos;
    const char* args; // extra "key=value" overrides separated by spaces, or NULL
} ModelCase;

static const ModelCase MODELS[] = {
    {"softmax", "learned", NULL},
    {"softmax", "rope", NULL},
    {"softmax", "alibi", NULL},
    {"softmax", "none", NULL},
    {"0:gated,1:ssmax", "rope", "attn.inner=ssmax"},
    {"0:ssmax,1:gated", "alibi", NULL},
    {"asentmax", "learned", NULL},
    {"0:softmax,1:ssa", "none", "attn.ssa_value=on"},
    {"boosted", "alibi", NULL},
    {"0:sigmoid,1:ssmax", "rope", "attn.bias_mode=learn"}, // P = 1 and 2: heads maxP apart
    // the residual-path model keys, alone and together, on plain and mixed attention
    {"softmax", "learned", "residual=attnres"},
    {"softmax", "rope", "residual=delta_attnres"},
    {"softmax", "learned", "value_residual=1"},
    {"0:gated,1:ssmax", "alibi", "residual=attnres value_residual=1"},
    {"0:ssmax,1:softmax", "none", "residual=delta_attnres value_residual=1"},
    {"softmax", "learned", "mlp=0"}, // attention-only blocks
    {"0:ssmax,1:gated", "rope", "mlp=0"},
    // the newest variants and position encoding
    {"softmax", "fire", NULL},
    {"0:diff,1:lucid", "fire", NULL},
    {"mta", "rope", NULL},
    {"0:softmax,1:mta", "alibi", "attn.cq=3 attn.kw=2 attn.conv_first=1 attn.rescale=on"},
    {"0:diff,1:lucid", "rope", "attn.inner=ssmax"},
    // qk-norm (both kinds) under every position encoding, on plain and layer-level attention
    {"softmax", "learned", "qk_norm=1"},
    {"softmax", "rope", "qk_norm=1 qk_norm_kind=rmsnorm"},
    {"softmax", "xpos", "qk_norm=1"},
    {"0:ssmax,1:gated", "alibi", "qk_norm=1 qk_norm_kind=rmsnorm value_residual=1"},
    {"0:diff,1:softmax", "fire", "qk_norm=1"},
    {"0:deltanet,1:mta", "none", "qk_norm=1"},
};

static void build(GPT2* m, const ModelCase* mc, int maxT, uint64_t seed) {
    Config c;
    char err[2048], arg[400];
    config_defaults(&c);
    c.n_layer = 2;
    c.n_head = 2;
    c.n_embd = 32;
    c.block_size = maxT;
    c.vocab_size = 97;
    util_strlcpy(c.attention, mc->attention, sizeof(c.attention));
    snprintf(arg, sizeof(arg), "pos_encoding=%s", mc->pos);
    ck_assert_msg(config_apply_arg(&c, arg, err, sizeof(err)) == 0, "%s", err);
    if (mc->args) {
        char buf[400];
        util_strlcpy(buf, mc->args, sizeof(buf));
        for (char* tok = strtok(buf, " "); tok; tok = strtok(NULL, " "))
            ck_assert_msg(config_apply_arg(&c, tok, err, sizeof(err)) == 0, "%s", err);
    }
    memset(m, 0, sizeof(*m));
    ck_assert_msg(gpt2_setup_attention(m, &c, err, sizeof(err)) == 0, "%s", err);
    GPT2Config gc;
    ck_assert_msg(gpt2_config_from(&gc, &c, err, sizeof(err)) == 0, "%s", err);
    gpt2_build(m, &gc);
    gpt2_init(m, seed);
    Rng r;
    rng_seed(&r, seed + 1);
    for (int s = 0; s < m->nspecs; s++) { // away from the init, which hides many mistakes
        float sd = s == P_FCW ? 0.4f : 0.1f;
        float* p = m->params + m->specs[s].offset;
        for (size_t k = 0; k < m->specs[s].size; k++)
            p[k] += sd * rng_normal(&r);
    }
    size_t V = (size_t)m->cfg.vocab_size, C = (size_t)m->cfg.n_embd;
    memset(m->params + m->specs[P_WTE].offset + V * C, 0,
           sizeof(float) * ((size_t)m->cfg.padded_vocab - V) * C);
    if (m->row_spec[P_FIRE] >= 0 && m->cfg.n_layer > 1) // layer 1: L = 512 |l| = 12.5 < T
        gpt2_tensor(m, m->params, m->row_spec[P_FIRE], 1)[1] = 12.5f / 512.0f;
}

// model.json, the parameters and the per-layer attention of m into dir
static void write_model(const GPT2* m, const char* dir, const char* pos) {
    char path[32768];
    for (int s = 0; s < GPT2_NUM_LLMC; s++) {
        const ParamSpec* sp = &m->specs[s];
        if (sp->size == 0) continue; // ln_2 and the MLP of an attention-only model
        int shape[4];
        for (int q = 0; q < sp->ndim; q++)
            shape[q] = (int)sp->shape[q];
        save(dir, sp->name, m->params + sp->offset, shape, sp->ndim);
    }
    snprintf(path, sizeof(path), "%s/model.json", dir);
    FILE* f = fopen(path, "w");
    ck_assert(f != NULL);
    const int L = m->cfg.n_layer, NH = m->cfg.n_head;
    fprintf(f, "{\"L\":%d,\"NH\":%d,\"C\":%d,\"V\":%d,\"pos\":\"%s\",\"mlp\":%d,", L, NH,
            m->cfg.n_embd, m->cfg.vocab_size, pos, m->cfg.mlp);
    // residual-path tensors (model-owned, after the llm.c ones): saved under their own names
    static const char* const RES[] = {"standard", "attnres", "delta_attnres"};
    fprintf(f, "\"qk_norm\":%d,\"qk_norm_kind\":\"%s\",", m->cfg.qk_norm,
            attn_qknorm_name(m->cfg.qk_norm_kind));
    fprintf(f, "\"residual\":\"%s\",\"value_residual\":%d,\"layers\":[", RES[m->cfg.residual],
            m->cfg.value_residual);
    const int rs[4] = {m->row_spec[P_RESID_QUERY], m->row_spec[P_VRES_LAMBDA],
                       m->row_spec[P_QKNORM_Q], m->row_spec[P_QKNORM_K]};
    for (int k = 0; k < 4; k++) {
        if (rs[k] < 0) continue;
        const ParamSpec* sp = &m->specs[rs[k]];
        int shape[2] = {(int)sp->shape[0], (int)sp->shape[1]};
        save(dir, sp->name, m->params + sp->offset, shape, 2);
    }
    for (int l = 0; l < L; l++) {
        const LayerAttn* la = &m->la[l];
        const int P = la->row->params_per_head;
        fprintf(f, "%s{\"variant\":\"%s\",\"hp\":", l ? "," : "", la->v->name);
        write_hp(f, la->v, &la->hp);
        fprintf(f, ",\"inner\":\"%s\",\"inner_hp\":", la->row->name);
        write_hp(f, la->row, &la->row_hp);
        fprintf(f, ",\"T_train\":%d,\"P\":%d,\"tensors\":[", la->hp.T_train, P);
        char name[128];
        if (P > 0) { // this layer's heads, maxP apart in attnp
            const float* rp = gpt2_tensor(m, m->params, m->row_spec[P_ATTNP], l);
            float buf[64 * ATTN_MAX_PPH];
            ck_assert_int_le(NH, 64);
            for (int h = 0; h < NH; h++)
                memcpy(buf + h * P, rp + (size_t)h * m->maxP, sizeof(float) * P);
            int shape[2] = {NH, P};
            snprintf(name, sizeof(name), "L%d.rowp", l);
            save(dir, name, buf, shape, 2);
        }
        if (m->row_spec[P_FIRE] >= 0) { // this layer's FIRE vector
            const ParamSpec* sp = &m->specs[m->row_spec[P_FIRE]];
            int shape[1] = {(int)sp->shape[1]};
            snprintf(name, sizeof(name), "L%d.fire", l);
            save(dir, name, gpt2_tensor(m, m->params, m->row_spec[P_FIRE], l), shape, 1);
        }
        for (int k = 0; k < la->ntensors; k++) {
            const ParamSpec* sp = &m->specs[la->tensor_spec[k]];
            const char* dot = strchr(sp->name, '.');
            ck_assert_msg(dot != NULL, "variant tensor %s", sp->name);
            int shape[4], nd = 0;
            for (int q = sp->stacked; q < sp->ndim; q++)
                shape[nd++] = (int)sp->shape[q];
            snprintf(name, sizeof(name), "L%d.t.%s", l, dot + 1);
            save(dir, name, gpt2_tensor(m, m->params, la->tensor_spec[k], l), shape, nd);
            fprintf(f, "%s\"%s\"", k ? "," : "", dot + 1);
        }
        fprintf(f, "]}");
    }
    fprintf(f, "]}\n");
    fclose(f);
}

START_TEST(test_model_logits_match_reference) {
    ck_assert_msg(have_numpy(), PY " with numpy is required for the independent references: "
                                   "sudo apt-get install python3-numpy (or bash scripts/deps)");
    enum { B = 2, T = 24, maxT = 32, NM = sizeof(MODELS) / sizeof(MODELS[0]) };
    char dirs[NM][600], cmd[32768], path[32768], err[512];
    float* logits[NM];
    int V = 0;
    int n = snprintf(cmd, sizeof(cmd), PY " %s/tests/ref/ref_gpt2.py --npy-dir", test_repo_root());
    for (int mi = 0; mi < NM; mi++) { // every model, then one reference call for all
        const ModelCase* mc = &MODELS[mi];
        util_strlcpy(dirs[mi], test_tmpdir(), sizeof(dirs[mi]));
        GPT2 m;
        build(&m, mc, maxT, 100 + (uint64_t)mi);
        gpt2_alloc_acts(&m, B, T, 2);
        int ids[B * T];
        float fids[B * T];
        Rng r;
        rng_seed(&r, 5 + (uint64_t)mi);
        for (int i = 0; i < B * T; i++) {
            ids[i] = (int)(rng_u64(&r) % (uint64_t)m.cfg.vocab_size);
            fids[i] = (float)ids[i];
        }
        int ts[2] = {B, T};
        save(dirs[mi], "tokens", fids, ts, 2);
        write_model(&m, dirs[mi], mc->pos);
        gpt2_forward(&m, ids, NULL, B, T);
        V = m.cfg.vocab_size;
        logits[mi] = mallocCheck(sizeof(float) * B * T * V);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                memcpy(logits[mi] + ((size_t)b * T + t) * V, gpt2_logits(&m, b, t),
                       sizeof(float) * V);
        gpt2_free(&m);
        n += snprintf(cmd + n, sizeof(cmd) - n, " %s", dirs[mi]);
        ck_assert((size_t)n < sizeof(cmd));
    }
    ck_assert_msg(system(cmd) == 0, "tests/ref/ref_gpt2.py failed (its message is above)");
    int bad = 0;
    for (int mi = 0; mi < NM; mi++) {
        const ModelCase* mc = &MODELS[mi];
        snprintf(path, sizeof(path), "%s/ref_logits.npy", dirs[mi]);
        NpyInfo info;
        float* ref = npy_read_f32(path, &info, err, sizeof(err));
        ck_assert_msg(ref != NULL, "%s", err);
        ck_assert_int_eq(info.count, (size_t)B * T * V);
        double md = 0, mr = 0;
        for (size_t j = 0; j < (size_t)B * T * V; j++) {
            double d = fabs((double)logits[mi][j] - (double)ref[j]);
            if (!(d <= md)) md = d; // NaN propagates
            if (fabs((double)ref[j]) > mr) mr = fabs((double)ref[j]);
        }
        free(ref);
        free(logits[mi]);
        double e = md / (mr > 1 ? mr : 1);
        fprintf(stderr, "%s %-22s pos=%-7s %s max|logit| %.3g, relative difference %.3g\n",
                e <= TOL ? "ok      " : "MISMATCH", mc->attention, mc->pos,
                mc->args ? mc->args : "", mr, e);
        ck_assert(mr > 0.5); // logits are not trivially flat
        if (!(e <= TOL)) bad++;
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dirs[mi]);
        ck_assert_int_eq(system(cmd), 0);
    }
    ck_assert_msg(bad == 0, "%d models' logits differ from the numpy reference (listed above)",
                  bad);
}
END_TEST

static Suite* ref_model_suite(void) {
    Suite* s = suite_create("ref_model");
    TCase* tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_model_logits_match_reference);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(ref_model_suite)
