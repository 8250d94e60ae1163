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
#include "model/settings.h"

// ---------------------------------------------------------------------------------------------
// GPT-2 name mapping, from the parameter table: a row with an HF name is "<hf>" (unstacked) or
// "h.<layer>.<hf>" per layer (stacked), stored (in, out) when hf_transpose and with the
// vocab_size real rows when vocab_rows; a row without one (an attention variant's tensor) is
// "attnlab.<name>", whole.

int hf_nonstandard(const GPT2* m, char* why, size_t cap) {
    const GPT2Config* c = &m->cfg;
    char buf[512] = "";
    size_t n = 0;
#define WHY(...)                                                                                   \
    do {                                                                                           \
        if (n < sizeof(buf)) n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s", n ? ", " : ""); \
        if (n < sizeof(buf)) n += (size_t)snprintf(buf + n, sizeof(buf) - n, __VA_ARGS__);         \
    } while (0)
    int softmax = 1;
    for (int l = 0; l < c->n_layer; l++)
        softmax &=
            strcmp(m->la[l].v->name, "softmax") == 0 && strcmp(m->la[l].row->name, "softmax") == 0;
    if (!softmax) WHY("attention '%s' (GPT-2: softmax)", m->attention);
    // every setting config.json carries (an attnlab_* key) at a value plain GPT-2 lacks; one that
    // needs another (qk_norm_kind: qk_norm) is named by that one
    for (int i = 0; i < MODEL_NSETTINGS; i++) {
        const ModelSetting* s = &MODEL_SETTINGS[i];
        if (s->kind == SETTING_SIZE || !s->hf || s->needs || setting_get(c, s) == s->absent)
            continue;
        if (s->kind == SETTING_ENUM)
            WHY("%s = %s (GPT-2: %s)", s->key, s->name(setting_get(c, s)), s->name(s->absent));
        else
            WHY("%s = %d", s->key, setting_get(c, s));
    }
    if (!n)
        for (int s = 0; s < m->nspecs; s++)
            if (!m->specs[s].hf) {
                WHY("tensor '%s', which GPT-2 has not", m->specs[s].name);
                break;
            }
#undef WHY
    if (why && cap) util_strlcpy(why, buf, cap);
    return n > 0;
}

int hf_is_plain_gpt2(const GPT2* m) {
    return !hf_nonstandard(m, NULL, 0);
}

// Number of HF tensors of spec s: one per layer for a stacked GPT-2 tensor, else one.
static int hf_count(const GPT2* m, int s) {
    return m->specs[s].hf && m->specs[s].stacked ? m->cfg.n_layer : 1;
}

// HF name of tensor (s, layer) with the "transformer." prefix or without.
static void hf_name(const GPT2* m, int s, int l, int prefix, char* out, size_t cap) {
    const ParamSpec* p = &m->specs[s];
    const char* pre = prefix ? "transformer." : "";
    if (!p->hf)
        snprintf(out, cap, "attnlab.%s", p->name);
    else if (p->stacked)
        snprintf(out, cap, "%sh.%d.%s", pre, l, p->hf);
    else
        snprintf(out, cap, "%s%s", pre, p->hf);
}

// HF shape of one HF tensor of spec s: a layer's slice for stacked GPT-2 tensors, (in, out) when
// transposed, vocab_size rows for the vocabulary.
static int hf_shape(const GPT2* m, int s, uint64_t* shape) {
    const ParamSpec* p = &m->specs[s];
    int first = p->hf && p->stacked ? 1 : 0, nd = p->ndim - first;
    for (int q = 0; q < nd; q++)
        shape[q] = p->shape[first + q];
    if (p->vocab_rows) shape[0] = (uint64_t)m->cfg.vocab_size;
    if (p->hf_transpose && nd == 2) {
        uint64_t t = shape[0];
        shape[0] = shape[1];
        shape[1] = t;
    }
    return nd;
}

static uint64_t numel_of(const uint64_t* shape, int nd) {
    uint64_t n = 1;
    for (int q = 0; q < nd; q++)
        n *= shape[q];
    return n;
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

// The (spec, layer) a file tensor name fills, as an index into the slot table (slot_base[s] +
// layer), or -1 for names that are no tensor of this model. A GPT-2 name of a layer >= n_layer is
// an error (-2, with err).
static int slot_of(const GPT2* m, const int* slot_base, const char* full, const char* path,
                   char* err, size_t errcap) {
    const char* nm = strncmp(full, "transformer.", 12) == 0 ? full + 12 : full;
    if (strncmp(full, "attnlab.", 8) == 0) {
        int s = gpt2_find_spec(m, full + 8);
        return s >= 0 && !m->specs[s].hf ? slot_base[s] : -1;
    }
    long l = -1;
    const char* rest = nm;
    if (strncmp(nm, "h.", 2) == 0) {
        char* e;
        errno = 0;
        l = strtol(nm + 2, &e, 10);
        if (e == nm + 2 || *e != '.' || l < 0 || l >= 100000) return -1;
        rest = e + 1;
    }
    for (int s = 0; s < m->nspecs; s++) {
        const ParamSpec* p = &m->specs[s];
        if (!p->hf || p->stacked != (l >= 0) || strcmp(rest, p->hf) != 0) continue;
        if (l >= m->cfg.n_layer) {
            snprintf(err, errcap, "%s: tensor %s belongs to layer %ld, the model has n_layer=%d",
                     path, full, l, m->cfg.n_layer);
            return -2;
        }
        return slot_base[s] + (l >= 0 ? (int)l : 0);
    }
    return -1;
}

int hf_load_safetensors(GPT2* m, const char* path, char* err, size_t errcap) {
    SafeTensors st;
    if (st_open(&st, path, err, errcap)) return -1;
    // slot_base[s]: first slot of spec s (hf_count(s) slots); slot[k]: the file tensor, -1 = none
    int* slot_base = mallocCheck(sizeof(int) * (size_t)(m->nspecs + 1));
    int nslots = 0;
    for (int s = 0; s < m->nspecs; s++) {
        slot_base[s] = nslots;
        nslots += hf_count(m, s);
    }
    int* slot = mallocCheck(sizeof(int) * (size_t)nslots);
    for (int i = 0; i < nslots; i++)
        slot[i] = -1;
    int rc = -1;
    float* buf = NULL;
    char ignored[512] = "";
    for (int i = 0; i < st.n; i++) {
        int idx = slot_of(m, slot_base, st.t[i].name, path, err, errcap);
        if (idx == -2) goto done;
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
    // check presence (GPT-2 tensors; variant tensors are optional) and shapes first, then read
    for (int s = 0; s < m->nspecs; s++) {
        for (int l = 0; l < hf_count(m, s); l++) {
            int i = slot[slot_base[s] + l];
            if (i < 0 && m->specs[s].hf) {
                char want[96];
                hf_name(m, s, l, 0, want, sizeof(want));
                snprintf(err, errcap, "%s: tensor %s (or transformer.%s) is missing", path, want,
                         want);
                goto done;
            }
            uint64_t shape[4];
            int nd = hf_shape(m, s, shape);
            if (i >= 0 && check_shape(&st, i, shape, nd, err, errcap)) goto done;
        }
    }
    size_t maxn = 0;
    for (int i = 0; i < st.n; i++)
        if (st.t[i].numel > maxn) maxn = (size_t)st.t[i].numel;
    buf = mallocCheck(sizeof(float) * (maxn + 1));
    for (int s = 0; s < m->nspecs; s++) {
        const ParamSpec* p = &m->specs[s];
        for (int l = 0; l < hf_count(m, s); l++) {
            int i = slot[slot_base[s] + l];
            if (i < 0) continue;
            if (st_read_f32(&st, i, buf, err, errcap)) goto done;
            float* dst = p->hf ? gpt2_tensor(m, m->params, s, l) : m->params + p->offset;
            uint64_t shape[4];
            int nd = hf_shape(m, s, shape);
            size_t n = (size_t)numel_of(shape, nd);
            if (p->hf_transpose) { // (in, out) -> (out, in)
                size_t IC = (size_t)shape[0], OC = (size_t)shape[1];
                for (size_t o = 0; o < OC; o++)
                    for (size_t k = 0; k < IC; k++)
                        dst[o * IC + k] = buf[k * OC + o];
            } else {
                memcpy(dst, buf, sizeof(float) * n);
            }
            if (p->vocab_rows) { // the padding rows are zero
                size_t all = p->stacked ? p->size / p->shape[0] : p->size;
                memset(dst + n, 0, sizeof(float) * (all - n));
            }
        }
    }
    if (ignored[0]) fprintf(stderr, "attnlab: %s: ignored tensors: %s\n", path, ignored);
    rc = 0;
done:
    free(buf);
    free(slot);
    free(slot_base);
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

// An optional 0/1 key (number or boolean; absent: 0).
static int flag01(const Jv* root, const char* key, const char* path, int* out, char* err,
                  size_t errcap) {
    const Jv* v = jv_get(root, key);
    *out = 0;
    if (!v) return 0;
    if (v->t == JV_BOOL) {
        *out = v->b ? 1 : 0;
        return 0;
    }
    if (v->t == JV_NUM && (v->num == 0 || v->num == 1)) {
        *out = v->num != 0;
        return 0;
    }
    snprintf(err, errcap, "%s: key '%s' must be 0 or 1", path, key);
    return -1;
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
    cfg->mlp = 1; // Hugging Face GPT-2 has an MLP in every block
    if (root.t != JV_OBJ) {
        snprintf(err, errcap, "%s: not a JSON object", path);
        goto done;
    }
    const Jv* mt = jv_get(&root, "model_type"); // gpt2, or an attnlab variant of GPT-2
    if (mt && (mt->t != JV_STR ||
               (strcmp(mt->s, "gpt2") != 0 && strcmp(mt->s, HF_MODEL_TYPE_ATTNLAB) != 0))) {
        snprintf(err, errcap, "%s: model_type is not \"gpt2\" or \"%s\"", path,
                 HF_MODEL_TYPE_ATTNLAB);
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
    for (int i = 0; i < MODEL_NSETTINGS; i++) { // GPT-2's sizes (n_layer, n_positions, ...)
        const ModelSetting* s = &MODEL_SETTINGS[i];
        int v = 0;
        if (s->kind != SETTING_SIZE) continue;
        if (cfg_int(&root, s->hf, path, 1, &v, err, errcap)) goto done;
        setting_set(cfg, s, v);
    }
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
    // attnlab's settings, the settings table's attnlab_* keys (absent from a plain GPT-2 file,
    // and from files written before a key: the row's `absent` value); names are those of the
    // enums' tables
    settings_absent(cfg);
    for (int i = 0; i < MODEL_NSETTINGS; i++) {
        const ModelSetting* s = &MODEL_SETTINGS[i];
        if (s->kind == SETTING_SIZE || !s->hf) continue;
        const Jv* v = jv_get(&root, s->hf);
        if (!v) continue;
        if (s->kind == SETTING_FLAG) {
            int f;
            if (flag01(&root, s->hf, path, &f, err, errcap)) goto done;
            setting_set(cfg, s, f);
            continue;
        }
        const int e = v->t == JV_STR ? s->from_name(v->s) : -1;
        if (e < 0) {
            snprintf(err, errcap, "%s: key '%s': '%.64s' is not %s", path, s->hf,
                     v->t == JV_STR ? v->s : "(not a string)", s->what);
            goto done;
        }
        setting_set(cfg, s, e);
    }
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

// Export entry of HF tensor (s, layer) (layer -1: an unstacked or whole tensor); *maxT grows to
// the floats of the largest transposed one.
static void exp_tensor(const GPT2* m, int s, int layer, ExpTensor* t, size_t* maxT) {
    hf_name(m, s, layer < 0 ? 0 : layer, 1, t->name, sizeof(t->name));
    t->spec = s;
    t->layer = layer;
    t->transposed = m->specs[s].hf_transpose;
    t->ndim = hf_shape(m, s, t->shape);
    size_t ne = (size_t)numel_of(t->shape, t->ndim);
    if (t->transposed && ne > *maxT) *maxT = ne;
}

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
    if (!c->mlp) {
        snprintf(err, errcap,
                 "%s: Hugging Face GPT-2 has an MLP in every block (this model has mlp = 0)", dir);
        return -1;
    }
    int plain = hf_is_plain_gpt2(m);
    if (util_mkdirs(dir, err, errcap)) return -1;
    char settings[512];
    settings_describe(settings, sizeof(settings), c, " = ", ", ");
    if (!plain)
        fprintf(stderr,
                "attnlab: warning: this model (attention '%s', %s) is not Hugging Face GPT-2: "
                "config.json gets "
                "model_type \"%s\" (architectures %s), which transformers does not take for "
                "GPT-2; the settings are recorded as attnlab_* keys in config.json and the "
                "safetensors metadata, the model's own tensors as attnlab.*; attnlab reads it "
                "back as hf:DIR\n",
                m->attention, settings, HF_MODEL_TYPE_ATTNLAB, HF_ARCH_ATTNLAB);
    // tensor list: the table's rows in order, except that the stacked GPT-2 rows are written
    // layer by layer (HF's h.<layer>.* blocks) where the first of them stands
    int cap = 0;
    for (int s = 0; s < m->nspecs; s++)
        cap += hf_count(m, s);
    ExpTensor* et = callocCheck((size_t)cap, sizeof(ExpTensor));
    int n = 0, layers_done = 0;
    size_t maxT = 16; // floats of the largest transposed tensor
    for (int s = 0; s < m->nspecs; s++) {
        if (!(m->specs[s].hf && m->specs[s].stacked)) {
            exp_tensor(m, s, -1, &et[n++], &maxT);
        } else if (!layers_done) {
            for (int l = 0; l < L; l++)
                for (int s2 = s; s2 < m->nspecs; s2++)
                    if (m->specs[s2].hf && m->specs[s2].stacked)
                        exp_tensor(m, s2, l, &et[n++], &maxT);
            layers_done = 1;
        }
    }
    ASSERT(n == cap);
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
    // safetensors metadata: the attention, then the settings table's attnlab_* keys in its order
    char vals[MODEL_MAX_SETTINGS][64];
    const char* meta[2 * (MODEL_MAX_SETTINGS + 1)] = {"attnlab_attention", m->attention};
    int nmeta = 1;
    for (int i = 0; i < MODEL_NSETTINGS; i++) {
        const ModelSetting* s = &MODEL_SETTINGS[i];
        if (s->kind == SETTING_SIZE || !s->hf) continue;
        setting_text(vals[nmeta], sizeof(vals[nmeta]), c, s);
        meta[2 * nmeta] = s->hf;
        meta[2 * nmeta + 1] = vals[nmeta];
        nmeta++;
    }
    char path[1100];
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    StWriter w;
    int rc = -1;
    float* buf = NULL;
    int opened = st_write_begin(&w, path, meta, plain ? 0 : nmeta, ss, n, err, errcap) == 0;
    free(ss);
    if (!opened) goto done;
    buf = mallocCheck(sizeof(float) * maxT);
    for (int i = 0; i < n; i++) {
        const ExpTensor* t = &et[i];
        const ParamSpec* s = &m->specs[t->spec];
        size_t numel = (size_t)(t->bytes / 4);
        // a layer's slice, or the whole tensor (with vocab_rows: its first vocab_size rows)
        const float* src =
            t->layer >= 0 ? gpt2_tensor(m, m->params, t->spec, t->layer) : m->params + s->offset;
        if (t->transposed) { // (out, in) -> (in, out)
            size_t IC = (size_t)t->shape[0], OC = (size_t)t->shape[1];
            for (size_t o = 0; o < OC; o++)
                for (size_t k = 0; k < IC; k++)
                    buf[k * OC + o] = src[o * IC + k];
            src = buf;
        }
        st_write_f32(&w, src, numel);
    }
    if (st_write_end(&w, err, errcap)) goto done;
    // config.json (the layout Hugging Face writes: a member a line)
    {
        const int eot = c->vocab_size == 50257 ? 50256 : c->vocab_size - 1;
        JsonBuf cj = {0};
        json_begin_lines(&cj);
        json_array_begin(&cj, "architectures");
        json_str(&cj, NULL, plain ? "GPT2LMHeadModel" : HF_ARCH_ATTNLAB);
        json_array_end(&cj);
        json_str(&cj, "model_type", plain ? "gpt2" : HF_MODEL_TYPE_ATTNLAB);
        json_str(&cj, "activation_function", "gelu_new");
        static const char* const PDROP[] = {"attn_pdrop", "embd_pdrop", "resid_pdrop",
                                            "summary_first_dropout"};
        for (int k = 0; k < 4; k++)
            json_literal(&cj, PDROP[k], "0.0");
        json_int(&cj, "bos_token_id", eot);
        json_int(&cj, "eos_token_id", eot);
        json_literal(&cj, "initializer_range", "0.02");
        json_literal(&cj, "layer_norm_epsilon", "1e-05");
        json_int(&cj, "n_ctx", c->block_size);
        json_int(&cj, "n_embd", c->n_embd);
        json_int(&cj, "n_head", c->n_head);
        json_null(&cj, "n_inner");
        json_int(&cj, "n_layer", c->n_layer);
        json_int(&cj, "n_positions", c->block_size);
        json_int(&cj, "vocab_size", c->vocab_size);
        json_bool(&cj, "scale_attn_weights", 1);
        json_bool(&cj, "tie_word_embeddings", 1);
        json_str(&cj, "torch_dtype", "float32");
        json_bool(&cj, "use_cache", 1);
        if (!plain) { // the attention, then the settings' attnlab_* keys sorted by name
            json_str(&cj, "attnlab_attention", m->attention);
            int order[MODEL_MAX_SETTINGS], no = 0;
            for (int i = 0; i < MODEL_NSETTINGS; i++) {
                if (MODEL_SETTINGS[i].kind == SETTING_SIZE || !MODEL_SETTINGS[i].hf) continue;
                int j = no++;
                for (; j > 0 && strcmp(MODEL_SETTINGS[order[j - 1]].hf, MODEL_SETTINGS[i].hf) > 0;
                     j--)
                    order[j] = order[j - 1];
                order[j] = i;
            }
            for (int k = 0; k < no; k++) {
                const ModelSetting* s = &MODEL_SETTINGS[order[k]];
                if (s->kind == SETTING_ENUM)
                    json_str(&cj, s->hf, s->name(setting_get(c, s)));
                else
                    json_int(&cj, s->hf, setting_get(c, s));
            }
        }
        json_end(&cj);
        snprintf(path, sizeof(path), "%s/config.json", dir);
        const int bad = json_write_file(&cj, path, err, errcap);
        json_free(&cj);
        if (bad) goto done;
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
    free(et);
    return rc;
}
