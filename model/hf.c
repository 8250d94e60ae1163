// model/hf.c: Hugging Face interop (see hf.h): the GPT2LMHeadModel tensor names and Conv1D
// transposes, config.json, import (hf_load, hf_read_config) and export (hf_export). The file
// formats are common/safetensors.c and common/json_read.c / common/json.c.
#include "model/hf.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/json.h"
#include "common/json_read.h"
#include "common/util.h"

// ---------------------------------------------------------------------------------------------
// GPT-2 name mapping

// Per-layer Hugging Face tensors: name suffix, attnlab spec, and whether the weight is a Conv1D
// stored (in, out) (transposed against attnlab's (out, in)).
static const struct {
    const char* hf;
    int spec;
    int transposed;
} LAYER_MAP[] = {
    {"ln_1.weight", P_LN1W, 0},
    {"ln_1.bias", P_LN1B, 0},
    {"attn.c_attn.weight", P_QKVW, 1},
    {"attn.c_attn.bias", P_QKVB, 0},
    {"attn.c_proj.weight", P_ATTPROJW, 1},
    {"attn.c_proj.bias", P_ATTPROJB, 0},
    {"ln_2.weight", P_LN2W, 0},
    {"ln_2.bias", P_LN2B, 0},
    {"mlp.c_fc.weight", P_FCW, 1},
    {"mlp.c_fc.bias", P_FCB, 0},
    {"mlp.c_proj.weight", P_FCPROJW, 1},
    {"mlp.c_proj.bias", P_FCPROJB, 0},
};
#define N_LAYER_MAP ((int)(sizeof(LAYER_MAP) / sizeof(LAYER_MAP[0])))

static const char* pos_name(int pe) {
    static const char* names[] = {"learned", "rope", "alibi", "none", "xpos", "fire"};
    return pe >= 0 && pe < 6 ? names[pe] : "learned";
}

int hf_is_plain_gpt2(const GPT2* m) {
    if (m->cfg.pos_encoding != ATTN_POS_LEARNED || m->cfg.qk_norm) return 0;
    for (int l = 0; l < m->cfg.n_layer; l++)
        if (strcmp(m->la[l].v->name, "softmax") != 0 || strcmp(m->la[l].row->name, "softmax") != 0)
            return 0;
    return m->nspecs == GPT2_NUM_LLMC;
}

// HF shape of attnlab spec `s` for one layer: (in, out) for Conv1D weights.
static int layer_shape(const GPT2* m, int spec, int transposed, uint64_t* shape) {
    const ParamSpec* s = &m->specs[spec];
    if (s->ndim == 3) {
        shape[0] = transposed ? s->shape[2] : s->shape[1];
        shape[1] = transposed ? s->shape[1] : s->shape[2];
        return 2;
    }
    shape[0] = s->shape[1];
    return 1;
}

// ---------------------------------------------------------------------------------------------
// import

static int shape_eq(const StTensor* t, const uint64_t* shape, int nd) {
    if (t->ndim != nd) return 0;
    for (int i = 0; i < nd; i++)
        if (t->shape[i] != shape[i]) return 0;
    return 1;
}

static void shape_str(char* buf, size_t cap, const uint64_t* shape, int nd) {
    size_t l = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < nd && l < cap; i++)
        l += (size_t)snprintf(buf + l, cap - l, "%s%llu", i ? ", " : "",
                              (unsigned long long)shape[i]);
    if (l < cap) snprintf(buf + l, cap - l, "]");
}

static int check_shape(const SafeTensors* st, int i, const uint64_t* want, int nd, char* err,
                       size_t errcap) {
    int dt = st->t[i].dtype;
    if (dt != ST_F32 && dt != ST_F16 && dt != ST_BF16 && dt != ST_F64) {
        snprintf(err, errcap,
                 "%s: tensor %s has dtype %s; parameters must be F32, F16, BF16 or "
                 "F64",
                 st->path, st->t[i].name, st->t[i].dtype_name);
        return -1;
    }
    if (shape_eq(&st->t[i], want, nd)) return 0;
    char a[128], b[128];
    shape_str(a, sizeof(a), st->t[i].shape, st->t[i].ndim);
    shape_str(b, sizeof(b), want, nd);
    snprintf(err, errcap, "%s: tensor %s has shape %s, the model expects %s", st->path,
             st->t[i].name, a, b);
    return -1;
}

int hf_load_safetensors(GPT2* m, const char* path, char* err, size_t errcap) {
    SafeTensors st;
    if (st_open(&st, path, err, errcap)) return -1;
    const GPT2Config* c = &m->cfg;
    const int L = c->n_layer;
    const size_t C = (size_t)c->n_embd, V = (size_t)c->vocab_size;
    // which file tensor fills which (spec, layer); -1 = not found yet
    int nslots = GPT2_NUM_LLMC * L + m->nspecs;
    int* slot = mallocCheck(sizeof(int) * (size_t)nslots);
    for (int i = 0; i < nslots; i++)
        slot[i] = -1;
    int rc = -1;
    float* buf = NULL;
    char ignored[512] = "";
    for (int i = 0; i < st.n; i++) {
        const char* nm = st.t[i].name;
        if (strncmp(nm, "transformer.", 12) == 0) nm += 12;
        int idx = -1;
        if (strcmp(nm, "wte.weight") == 0)
            idx = P_WTE * L;
        else if (strcmp(nm, "wpe.weight") == 0)
            idx = P_WPE * L;
        else if (strcmp(nm, "ln_f.weight") == 0)
            idx = P_LNFW * L;
        else if (strcmp(nm, "ln_f.bias") == 0)
            idx = P_LNFB * L;
        else if (strncmp(nm, "h.", 2) == 0) {
            char* rest;
            errno = 0;
            long l = strtol(nm + 2, &rest, 10);
            if (rest != nm + 2 && *rest == '.' && l >= 0 && l < 100000) {
                for (int k = 0; k < N_LAYER_MAP; k++)
                    if (strcmp(rest + 1, LAYER_MAP[k].hf) == 0) {
                        if (l >= L) {
                            snprintf(err, errcap,
                                     "%s: tensor %s belongs to layer %ld, the model "
                                     "has n_layer=%d",
                                     path, st.t[i].name, l, L);
                            goto done;
                        }
                        idx = LAYER_MAP[k].spec * L + (int)l;
                    }
            }
        } else if (strncmp(st.t[i].name, "attnlab.", 8) == 0) {
            int s = gpt2_find_spec(m, st.t[i].name + 8);
            if (s >= GPT2_NUM_LLMC) idx = GPT2_NUM_LLMC * L + s;
        }
        if (idx < 0) { // lm_head (tied), attention bias buffers and anything foreign
            size_t l = strlen(ignored);
            if (l + 80 < sizeof(ignored))
                snprintf(ignored + l, sizeof(ignored) - l, "%s%s", l ? ", " : "", st.t[i].name);
            continue;
        }
        if (slot[idx] >= 0) {
            snprintf(err, errcap, "%s: tensor %s and %s hold the same parameter", path,
                     st.t[slot[idx]].name, st.t[i].name);
            goto done;
        }
        slot[idx] = i;
    }
    // check presence and shapes of everything first, then read
    for (int s = 0; s < GPT2_NUM_LLMC; s++) {
        int per_layer = m->specs[s].stacked;
        for (int l = 0; l < (per_layer ? L : 1); l++) {
            int i = slot[s * L + l];
            if (i < 0) {
                char want[96];
                if (!per_layer)
                    snprintf(want, sizeof(want), "%s",
                             s == P_WTE    ? "wte.weight"
                             : s == P_WPE  ? "wpe.weight"
                             : s == P_LNFW ? "ln_f.weight"
                                           : "ln_f.bias");
                else
                    for (int k = 0; k < N_LAYER_MAP; k++)
                        if (LAYER_MAP[k].spec == s)
                            snprintf(want, sizeof(want), "h.%d.%s", l, LAYER_MAP[k].hf);
                snprintf(err, errcap, "%s: tensor %s (or transformer.%s) is missing", path, want,
                         want);
                goto done;
            }
            uint64_t shape[2];
            int nd;
            if (s == P_WTE) {
                shape[0] = V;
                shape[1] = C;
                nd = 2;
            } else if (!per_layer) {
                nd = m->specs[s].ndim;
                for (int q = 0; q < nd; q++)
                    shape[q] = m->specs[s].shape[q];
            } else {
                int tr = 0;
                for (int k = 0; k < N_LAYER_MAP; k++)
                    if (LAYER_MAP[k].spec == s) tr = LAYER_MAP[k].transposed;
                nd = layer_shape(m, s, tr, shape);
            }
            if (check_shape(&st, i, shape, nd, err, errcap)) goto done;
        }
    }
    for (int s = GPT2_NUM_LLMC; s < m->nspecs; s++) {
        int i = slot[GPT2_NUM_LLMC * L + s];
        if (i < 0) continue;
        uint64_t shape[4];
        for (int q = 0; q < m->specs[s].ndim; q++)
            shape[q] = m->specs[s].shape[q];
        if (check_shape(&st, i, shape, m->specs[s].ndim, err, errcap)) goto done;
    }
    size_t maxn = 0;
    for (int i = 0; i < st.n; i++)
        if (st.t[i].numel > maxn) maxn = (size_t)st.t[i].numel;
    buf = mallocCheck(sizeof(float) * (maxn + 1));
    for (int s = 0; s < GPT2_NUM_LLMC; s++) {
        int per_layer = m->specs[s].stacked;
        for (int l = 0; l < (per_layer ? L : 1); l++) {
            int i = slot[s * L + l];
            if (st_read_f32(&st, i, buf, err, errcap)) goto done;
            float* dst = gpt2_tensor(m, m->params, s, l);
            if (s == P_WTE) { // real rows, then zero padding
                memcpy(dst, buf, sizeof(float) * V * C);
                memset(dst + V * C, 0, sizeof(float) * ((size_t)c->padded_vocab - V) * C);
            } else if (per_layer && m->specs[s].ndim == 3) { // (in, out) -> (out, in)
                size_t OC = m->specs[s].shape[1], IC = m->specs[s].shape[2];
                for (size_t o = 0; o < OC; o++)
                    for (size_t k = 0; k < IC; k++)
                        dst[o * IC + k] = buf[k * OC + o];
            } else {
                size_t n = per_layer ? m->specs[s].size / m->specs[s].shape[0] : m->specs[s].size;
                memcpy(dst, buf, sizeof(float) * n);
            }
        }
    }
    for (int s = GPT2_NUM_LLMC; s < m->nspecs; s++) {
        int i = slot[GPT2_NUM_LLMC * L + s];
        if (i >= 0 && st_read_f32(&st, i, m->params + m->specs[s].offset, err, errcap)) goto done;
    }
    if (ignored[0]) fprintf(stderr, "attnlab: %s: ignored tensors: %s\n", path, ignored);
    rc = 0;
done:
    free(buf);
    free(slot);
    st_close(&st);
    return rc;
}

int hf_load(GPT2* m, const char* dir, char* err, size_t errcap) {
    char path[1100];
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    return hf_load_safetensors(m, path, err, errcap);
}

static int cfg_int(const Jv* root, const char* key, const char* path, int required, int* out,
                   char* err, size_t errcap) {
    const Jv* v = jv_get(root, key);
    if (!v || v->t == JV_NULL) {
        if (!required) return 1;
        snprintf(err, errcap, "%s: key '%s' is missing", path, key);
        return -1;
    }
    if (v->t != JV_NUM || !v->is_uint || v->u == 0 || v->u > (1u << 24)) {
        snprintf(err, errcap, "%s: key '%s' must be a positive integer", path, key);
        return -1;
    }
    *out = (int)v->u;
    return 0;
}

int hf_read_config(const char* dir, GPT2Config* cfg, char* attention, size_t attcap, char* err,
                   size_t errcap) {
    char path[1100];
    snprintf(path, sizeof(path), "%s/config.json", dir);
    size_t len;
    char* text = util_read_file(path, &len, err, errcap);
    if (!text) return -1;
    Jv root;
    char jerr[300];
    if (json_parse(&root, text, len, jerr, sizeof(jerr))) {
        free(text);
        snprintf(err, errcap, "%s: not valid JSON: %s", path, jerr);
        return -1;
    }
    free(text);
    int rc = -1;
    memset(cfg, 0, sizeof(*cfg));
    if (root.t != JV_OBJ) {
        snprintf(err, errcap, "%s: not a JSON object", path);
        goto done;
    }
    const Jv* mt = jv_get(&root, "model_type");
    if (mt && (mt->t != JV_STR || strcmp(mt->s, "gpt2") != 0)) {
        snprintf(err, errcap, "%s: model_type is not \"gpt2\"", path);
        goto done;
    }
    const Jv* af = jv_get(&root, "activation_function");
    if (af && (af->t != JV_STR ||
               (strcmp(af->s, "gelu_new") != 0 && strcmp(af->s, "gelu_pytorch_tanh") != 0))) {
        snprintf(err, errcap,
                 "%s: activation_function must be \"gelu_new\" (the tanh GELU "
                 "attnlab computes)",
                 path);
        goto done;
    }
    const Jv* eps = jv_get(&root, "layer_norm_epsilon");
    if (eps && (eps->t != JV_NUM || fabs(eps->num - 1e-5) > 1e-12)) {
        snprintf(err, errcap, "%s: layer_norm_epsilon must be 1e-05 (attnlab's LayerNorm)", path);
        goto done;
    }
    if (cfg_int(&root, "n_layer", path, 1, &cfg->n_layer, err, errcap) ||
        cfg_int(&root, "n_head", path, 1, &cfg->n_head, err, errcap) ||
        cfg_int(&root, "n_embd", path, 1, &cfg->n_embd, err, errcap) ||
        cfg_int(&root, "n_positions", path, 1, &cfg->block_size, err, errcap) ||
        cfg_int(&root, "vocab_size", path, 1, &cfg->vocab_size, err, errcap))
        goto done;
    int inner = 0;
    int r = cfg_int(&root, "n_inner", path, 0, &inner, err, errcap);
    if (r < 0) goto done;
    if (r == 0 && inner != 4 * cfg->n_embd) {
        snprintf(err, errcap, "%s: n_inner=%d, attnlab's MLP is 4*n_embd=%d", path, inner,
                 4 * cfg->n_embd);
        goto done;
    }
    if (cfg->n_layer > GPT2_MAX_LAYERS || cfg->n_embd % cfg->n_head != 0) {
        snprintf(err, errcap, "%s: unsupported sizes (n_layer=%d n_embd=%d n_head=%d)", path,
                 cfg->n_layer, cfg->n_embd, cfg->n_head);
        goto done;
    }
    cfg->padded_vocab = (cfg->vocab_size + 127) / 128 * 128;
    cfg->pos_encoding = ATTN_POS_LEARNED;
    const Jv* pe = jv_get(&root, "attnlab_pos_encoding");
    if (pe && pe->t == JV_STR) {
        for (int i = 0; i < 6; i++)
            if (strcmp(pe->s, pos_name(i)) == 0) cfg->pos_encoding = i;
    }
    const Jv* qk = jv_get(&root, "attnlab_qk_norm");
    if (qk && ((qk->t == JV_BOOL && qk->b) || (qk->t == JV_NUM && qk->num != 0))) cfg->qk_norm = 1;
    const Jv* at = jv_get(&root, "attnlab_attention");
    if (attention) {
        if (at && at->t == JV_STR)
            util_strlcpy(attention, at->s, attcap);
        else
            util_strlcpy(attention, "softmax", attcap);
    }
    rc = 0;
done:
    jv_free(&root);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// export

typedef struct {
    char name[96];
    int spec, layer, transposed;
    int ndim;
    uint64_t shape[4];
    uint64_t bytes;
} ExpTensor;

static int copy_file(const char* src, const char* dst, char* err, size_t errcap) {
    size_t len;
    char* text = util_read_file(src, &len, err, errcap);
    if (!text) return -1;
    AtomicFile af;
    int rc = 0;
    if (atomic_open(&af, dst) || atomic_write(&af, text, len) || atomic_commit(&af)) {
        snprintf(err, errcap, "%s", af.err);
        rc = -1;
    }
    free(text);
    return rc;
}

int hf_export(const GPT2* m, const char* dir, const char* tokenizer_dir, char* err, size_t errcap) {
    const GPT2Config* c = &m->cfg;
    const int L = c->n_layer;
    const size_t C = (size_t)c->n_embd, V = (size_t)c->vocab_size;
    int plain = hf_is_plain_gpt2(m);
    if (util_mkdirs(dir, err, errcap)) return -1;
    char* att_esc = json_escape(m->attention, strlen(m->attention)); // quoted
    if (!plain)
        fprintf(stderr,
                "attnlab: warning: this model (attention '%s', positions %s, qk_norm %d) "
                "is not Hugging Face GPT-2: transformers will load the weights but compute "
                "softmax attention with learned positions. The variant is recorded as "
                "attnlab_attention in config.json and the safetensors metadata; its own tensors "
                "are saved as attnlab.*\n",
                m->attention, pos_name(c->pos_encoding), c->qk_norm);
    // tensor list
    int cap = 4 + 12 * L + m->nspecs;
    ExpTensor* et = callocCheck((size_t)cap, sizeof(ExpTensor));
    int n = 0;
    et[n++] = (ExpTensor){"transformer.wte.weight", P_WTE, 0, 0, 2, {V, C, 0, 0}, 0};
    et[n++] = (ExpTensor){"transformer.wpe.weight",           P_WPE, 0, 0, 2,
                          {(uint64_t)c->block_size, C, 0, 0}, 0};
    for (int l = 0; l < L; l++)
        for (int k = 0; k < N_LAYER_MAP; k++) {
            ExpTensor* t = &et[n++];
            snprintf(t->name, sizeof(t->name), "transformer.h.%d.%s", l, LAYER_MAP[k].hf);
            t->spec = LAYER_MAP[k].spec;
            t->layer = l;
            t->transposed = LAYER_MAP[k].transposed;
            t->ndim = layer_shape(m, t->spec, t->transposed, t->shape);
        }
    et[n++] = (ExpTensor){"transformer.ln_f.weight", P_LNFW, 0, 0, 1, {C, 0, 0, 0}, 0};
    et[n++] = (ExpTensor){"transformer.ln_f.bias", P_LNFB, 0, 0, 1, {C, 0, 0, 0}, 0};
    for (int s = GPT2_NUM_LLMC; s < m->nspecs; s++) {
        ExpTensor* t = &et[n++];
        snprintf(t->name, sizeof(t->name), "attnlab.%s", m->specs[s].name);
        t->spec = s;
        t->layer = -1;
        t->ndim = m->specs[s].ndim;
        for (int q = 0; q < t->ndim; q++)
            t->shape[q] = m->specs[s].shape[q];
    }
    // model.safetensors: the tensors in the order listed, F32
    StSpec* ss = callocCheck((size_t)n, sizeof(StSpec));
    for (int i = 0; i < n; i++) {
        util_strlcpy(ss[i].name, et[i].name, sizeof(ss[i].name));
        ss[i].ndim = et[i].ndim;
        uint64_t numel = 1;
        for (int q = 0; q < et[i].ndim; q++) {
            ss[i].shape[q] = et[i].shape[q];
            numel *= et[i].shape[q];
        }
        et[i].bytes = 4 * numel;
    }
    char qk[8];
    snprintf(qk, sizeof(qk), "%d", c->qk_norm);
    const char* meta[6] = {"attnlab_attention",       m->attention,      "attnlab_pos_encoding",
                           pos_name(c->pos_encoding), "attnlab_qk_norm", qk};
    char path[1100];
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    AtomicFile af;
    StWriter w;
    int rc = -1;
    float* buf = NULL;
    int opened = st_write_begin(&w, path, meta, plain ? 0 : 3, ss, n, err, errcap) == 0;
    free(ss);
    if (!opened) goto done;
    buf = mallocCheck(sizeof(float) * (4 * C * C + 16));
    for (int i = 0; i < n; i++) {
        ExpTensor* t = &et[i];
        const ParamSpec* s = &m->specs[t->spec];
        size_t numel = (size_t)(t->bytes / 4);
        if (t->spec == P_WTE) {
            st_write_f32(&w, m->params + s->offset, numel); // the V real rows
        } else if (t->layer < 0 || !s->stacked) {
            st_write_f32(&w, m->params + s->offset, numel);
        } else {
            const float* src = gpt2_tensor(m, m->params, t->spec, t->layer);
            if (t->transposed) { // (out, in) -> (in, out)
                size_t OC = s->shape[1], IC = s->shape[2];
                for (size_t o = 0; o < OC; o++)
                    for (size_t k = 0; k < IC; k++)
                        buf[k * OC + o] = src[o * IC + k];
                src = buf;
            }
            st_write_f32(&w, src, numel);
        }
    }
    if (st_write_end(&w, err, errcap)) goto done;
    // config.json
    {
        int eot = c->vocab_size == 50257 ? 50256 : c->vocab_size - 1;
        char* cj = NULL;
        size_t cl = 0;
        FILE* f = open_memstream(&cj, &cl);
        if (!f) die(1, "cannot allocate config.json");
        fprintf(
            f,
            "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n"
            "  \"activation_function\": \"gelu_new\",\n  \"attn_pdrop\": 0.0,\n"
            "  \"embd_pdrop\": 0.0,\n  \"resid_pdrop\": 0.0,\n  \"summary_first_dropout\": 0.0,\n"
            "  \"bos_token_id\": %d,\n  \"eos_token_id\": %d,\n"
            "  \"initializer_range\": 0.02,\n  \"layer_norm_epsilon\": 1e-05,\n"
            "  \"n_ctx\": %d,\n  \"n_embd\": %d,\n  \"n_head\": %d,\n  \"n_inner\": null,\n"
            "  \"n_layer\": %d,\n  \"n_positions\": %d,\n  \"vocab_size\": %d,\n"
            "  \"scale_attn_weights\": true,\n  \"tie_word_embeddings\": true,\n"
            "  \"torch_dtype\": \"float32\",\n  \"use_cache\": true",
            eot, eot, c->block_size, c->n_embd, c->n_head, c->n_layer, c->block_size,
            c->vocab_size);
        if (!plain)
            fprintf(f,
                    ",\n  \"attnlab_attention\": %s,\n  \"attnlab_pos_encoding\": \"%s\",\n"
                    "  \"attnlab_qk_norm\": %d",
                    att_esc, pos_name(c->pos_encoding), c->qk_norm);
        fprintf(f, "\n}\n");
        fclose(f);
        snprintf(path, sizeof(path), "%s/config.json", dir);
        int bad = atomic_open(&af, path) || atomic_write(&af, cj, cl) || atomic_commit(&af);
        free(cj);
        if (bad) {
            snprintf(err, errcap, "%s", af.err);
            goto done;
        }
    }
    if (tokenizer_dir) {
        char src[1100];
        snprintf(src, sizeof(src), "%s/encoder.json", tokenizer_dir);
        snprintf(path, sizeof(path), "%s/vocab.json", dir);
        if (copy_file(src, path, err, errcap)) goto done;
        snprintf(src, sizeof(src), "%s/vocab.bpe", tokenizer_dir);
        snprintf(path, sizeof(path), "%s/merges.txt", dir);
        if (copy_file(src, path, err, errcap)) goto done;
    }
    rc = 0;
done:
    free(buf);
    free(att_esc);
    free(et);
    return rc;
}
