// model/params.c: the model's parameter table. One declarative row per tensor (shape, init rule,
// weight decay, Hugging Face name, whether a matmul writes the whole gradient), GPT-2's own
// tensors first, then the rows a config switches on (.when): the row maps' per-head parameters,
// FIRE, the attention variants' layer tensors (one row that expands to each variant's
// layer_tensors), the routed residual's queries, value_residual's mixing weights and the qk-norm
// gains. The table
// is resolved against a model into GPT2.specs, which init, checkpoints, the optimizer, metrics
// and the exporters all read (model/gpt2.h).
#include "model/params.h"

#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "model/residual.h"

// Symbolic sizes of the rows, resolved against the model by dim_of; 0 ends a row's dims. A row
// whose first dimension is a layer dimension (D_L, D_LM) is stacked: gpt2_tensor slices it by
// layer, and the Hugging Face names of such rows carry "h.<layer>.".
enum { D_END, D_VP, D_MAXT, D_L, D_LM, D_C, D_3C, D_4C, D_NH, D_MAXP, D_FIRE, D_RQ, D_2, D_HS };

static size_t dim_of(int d, const GPT2Config* c, int maxP) {
    const size_t C = (size_t)c->n_embd;
    switch (d) {
    case D_VP:
        return (size_t)c->padded_vocab;
    case D_MAXT:
        return (size_t)c->block_size;
    case D_L:
        return (size_t)c->n_layer;
    case D_LM: // layers with an MLP: n_layer, or 0 under mlp = 0 (attention-only blocks)
        return c->mlp ? (size_t)c->n_layer : 0;
    case D_C:
        return C;
    case D_3C:
        return 3 * C;
    case D_4C:
        return 4 * C;
    case D_NH:
        return (size_t)c->n_head;
    case D_MAXP: // the largest params_per_head among the layers' row maps
        return (size_t)maxP;
    case D_FIRE:
        return (size_t)attn_fire_nparams(c->n_head);
    case D_RQ:
        return (size_t)resid_query_rows(c->residual, c->n_layer);
    case D_HS: // the head size
        return C / (size_t)c->n_head;
    default: // D_2
        return 2;
    }
}

// Predicates on the model that switch a row on (.when); a row without one is always present.
enum { ALWAYS, HAS_ROWMAP_PARAMS, HAS_FIRE, HAS_RESID_QUERY, HAS_VALUE_RESIDUAL, HAS_QK_NORM };

static int row_present(int when, const GPT2* m) {
    switch (when) {
    case HAS_ROWMAP_PARAMS:
        return m->maxP > 0;
    case HAS_FIRE:
        return m->cfg.pos_encoding == ATTN_POS_FIRE;
    case HAS_RESID_QUERY:
        return resid_query_rows(m->cfg.residual, m->cfg.n_layer) > 0;
    case HAS_VALUE_RESIDUAL:
        return m->cfg.value_residual;
    case HAS_QK_NORM:
        return m->cfg.qk_norm;
    default:
        return 1;
    }
}

typedef struct {
    const char* name;
    int dims[4];    // D_*, 0-terminated
    int init;       // ParamInit
    int decay;      // weight decay applies
    int vocab_rows; // first dimension is the padded vocabulary (ParamSpec.vocab_rows)
    const char* hf; // Hugging Face GPT2LMHeadModel name; NULL: not a GPT-2 tensor
    int hf_t;       // HF stores it (in, out): a Conv1D weight
    int mm_grad;    // the gradient is a weight-gradient matmul's output (ParamSpec.mm_grad)
    int variant;    // belongs to the attention (ParamSpec.variant_owned)
    int when;       // predicate that switches the row on; ALWAYS (0) by default
    // the row stands for several tensors and adds them itself (instead of one of `dims`)
    void (*expand)(GPT2* m, int row);
} ParamRow;

static void variant_tensors(GPT2* m, int row);

// GPT-2's rows (P_WTE..P_LNFB, llm.c's ParameterTensors in its file order: a row's llm.c slot is
// its index) have N(0, 0.02) for the embeddings and the matrices that read the residual stream,
// N(0, 0.02/sqrt(2L)) for the two projections that write into it (GPT-2's scaled residual
// init), LayerNorm gains 1, biases 0; weight decay on the matrices and embeddings only. The rows
// after them are attnlab's, without llm.c slot or Hugging Face name, none with weight decay
// except the variant matrices that declare it.
static const ParamRow TABLE[GPT2_NUM_ROWS] = {
    [P_WTE] = {.name = "wte",
               .dims = {D_VP, D_C},
               .init = PINIT_NORMAL,
               .decay = 1,
               .vocab_rows = 1,
               .hf = "wte.weight",
               .mm_grad = 1},
    [P_WPE] = {.name = "wpe",
               .dims = {D_MAXT, D_C},
               .init = PINIT_NORMAL,
               .decay = 1,
               .hf = "wpe.weight"},
    [P_LN1W] = {.name = "ln1w", .dims = {D_L, D_C}, .init = PINIT_ONES, .hf = "ln_1.weight"},
    [P_LN1B] = {.name = "ln1b", .dims = {D_L, D_C}, .init = PINIT_ZERO, .hf = "ln_1.bias"},
    [P_QKVW] = {.name = "qkvw",
                .dims = {D_L, D_3C, D_C},
                .init = PINIT_NORMAL,
                .decay = 1,
                .hf = "attn.c_attn.weight",
                .hf_t = 1,
                .mm_grad = 1},
    [P_QKVB] = {.name = "qkvb", .dims = {D_L, D_3C}, .init = PINIT_ZERO, .hf = "attn.c_attn.bias"},
    [P_ATTPROJW] = {.name = "attprojw",
                    .dims = {D_L, D_C, D_C},
                    .init = PINIT_RESID,
                    .decay = 1,
                    .hf = "attn.c_proj.weight",
                    .hf_t = 1,
                    .mm_grad = 1},
    [P_ATTPROJB] = {.name = "attprojb",
                    .dims = {D_L, D_C},
                    .init = PINIT_ZERO,
                    .hf = "attn.c_proj.bias"},
    [P_LN2W] = {.name = "ln2w", .dims = {D_LM, D_C}, .init = PINIT_ONES, .hf = "ln_2.weight"},
    [P_LN2B] = {.name = "ln2b", .dims = {D_LM, D_C}, .init = PINIT_ZERO, .hf = "ln_2.bias"},
    [P_FCW] = {.name = "fcw",
               .dims = {D_LM, D_4C, D_C},
               .init = PINIT_NORMAL,
               .decay = 1,
               .hf = "mlp.c_fc.weight",
               .hf_t = 1,
               .mm_grad = 1},
    [P_FCB] = {.name = "fcb", .dims = {D_LM, D_4C}, .init = PINIT_ZERO, .hf = "mlp.c_fc.bias"},
    [P_FCPROJW] = {.name = "fcprojw",
                   .dims = {D_LM, D_C, D_4C},
                   .init = PINIT_RESID,
                   .decay = 1,
                   .hf = "mlp.c_proj.weight",
                   .hf_t = 1,
                   .mm_grad = 1},
    [P_FCPROJB] = {.name = "fcprojb",
                   .dims = {D_LM, D_C},
                   .init = PINIT_ZERO,
                   .hf = "mlp.c_proj.bias"},
    [P_LNFW] = {.name = "lnfw", .dims = {D_C}, .init = PINIT_ONES, .hf = "ln_f.weight"},
    [P_LNFB] = {.name = "lnfb", .dims = {D_C}, .init = PINIT_ZERO, .hf = "ln_f.bias"},
    // every layer's row-map parameters, heads maxP apart whatever the layer's row map uses
    [P_ATTNP] = {.name = "attnp",
                 .dims = {D_L, D_NH, D_MAXP},
                 .init = PINIT_ROWMAP,
                 .variant = 1,
                 .when = HAS_ROWMAP_PARAMS},
    // pos_encoding = fire: one FIRE parameter vector per layer
    [P_FIRE] =
        {.name = "fire", .dims = {D_L, D_FIRE}, .init = PINIT_FIRE, .variant = 1, .when = HAS_FIRE},
    // "<variant>.<tensor>" (L, shape...) for each tensor of each layer-level variant in use
    [P_VARIANT] = {.name = "<variant>.<tensor>",
                   .dims = {D_L},
                   .init = PINIT_LAYER,
                   .variant = 1,
                   .expand = variant_tensors},
    // residual = attnres | delta_attnres: the routing queries, 0 (uniform routing)
    [P_RESID_QUERY] = {.name = "resid.query",
                       .dims = {D_RQ, D_C},
                       .init = PINIT_ZERO,
                       .when = HAS_RESID_QUERY},
    // value_residual: the per-layer mixing weights, (0.5, 0.5)
    [P_VRES_LAMBDA] = {.name = "value_residual.lambda",
                       .dims = {D_L, D_2},
                       .init = PINIT_HALF,
                       .when = HAS_VALUE_RESIDUAL},
    // qk_norm = 1: the gains of the normalised q and k, one per layer shared by the heads, 1 (a
    // plain normalisation at step 0), no weight decay (a gain, like the LayerNorm weights)
    [P_QKNORM_Q] = {.name = "qk_norm.q_gain",
                    .dims = {D_L, D_HS},
                    .init = PINIT_ONES,
                    .when = HAS_QK_NORM},
    [P_QKNORM_K] = {.name = "qk_norm.k_gain",
                    .dims = {D_L, D_HS},
                    .init = PINIT_ONES,
                    .when = HAS_QK_NORM},
};

_Static_assert(P_LNFB == GPT2_NUM_LLMC - 1, "GPT-2's rows, in llm.c's order, come first");

static int row_stacked(int row) {
    return TABLE[row].dims[0] == D_L || TABLE[row].dims[0] == D_LM;
}

static int row_llmc(int row) {
    return row < GPT2_NUM_LLMC ? row : -1;
}

// Append one tensor of row `row` to m->specs: the row's rules, this name, shape and decay.
static void add_spec(GPT2* m, int row, const char* name, int ndim, const size_t* shape, int decay) {
    const ParamRow* r = &TABLE[row];
    ASSERT(m->nspecs < GPT2_MAX_SPECS && ndim <= 4);
    ParamSpec* s = &m->specs[m->nspecs++];
    memset(s, 0, sizeof(*s));
    util_strlcpy(s->name, name, sizeof(s->name));
    s->ndim = ndim;
    s->size = 1;
    for (int i = 0; i < ndim; i++) {
        s->shape[i] = shape[i];
        s->size *= shape[i];
    }
    s->row = row;
    s->stacked = row_stacked(row);
    s->init = r->init;
    s->decay = decay;
    s->vocab_rows = r->vocab_rows;
    s->hf = r->hf;
    s->hf_transpose = r->hf_t;
    s->llmc = row_llmc(row);
    s->variant_owned = r->variant;
    s->mm_grad = r->mm_grad;
}

// The index in m->specs of the tensor named `name` (the model's tensors as the table made them),
// -1 if absent.
int gpt2_find_spec(const GPT2* m, const char* name) {
    for (int i = 0; i < m->nspecs; i++)
        if (strcmp(m->specs[i].name, name) == 0) return i;
    return -1;
}

// P_VARIANT: one stacked tensor per (variant, tensor) in use, (L, the variant's per-layer
// shape), in the order the layers first name them; a layer's tensors, in its variant's
// layer_tensors order, have increasing indices (gpt2_init draws them in that order).
static void variant_tensors(GPT2* m, int row) {
    const GPT2Config* cfg = &m->cfg;
    for (int l = 0; l < cfg->n_layer; l++) {
        LayerAttn* la = &m->la[l];
        if (!la->v->layer_tensors) continue;
        AttnTensorSpec ts[ATTN_MAX_TENSORS];
        AttnDims d = {.B = 1,
                      .T = cfg->block_size,
                      .C = cfg->n_embd,
                      .NH = cfg->n_head,
                      .hs = cfg->n_embd / cfg->n_head};
        int nt = la->v->layer_tensors(ts, &d, &la->hp);
        ASSERT(nt <= ATTN_MAX_TENSORS);
        for (int k = 0; k < nt; k++) {
            char name[64];
            snprintf(name, sizeof(name), "%s.%s", la->v->name, ts[k].name);
            int idx = gpt2_find_spec(m, name);
            if (idx < 0) {
                size_t shape[4] = {(size_t)cfg->n_layer, 1, 1, 1};
                for (int q = 0; q < ts[k].ndim; q++)
                    shape[q + 1] = (size_t)ts[k].shape[q];
                idx = m->nspecs;
                add_spec(m, row, name, ts[k].ndim + 1, shape, ts[k].decay);
            }
            ASSERT(k == 0 || idx > la->tensor_spec[k - 1]);
            la->tensor_spec[k] = idx;
        }
        la->ntensors = nt;
    }
}

void gpt2_add_specs(GPT2* m) {
    m->nspecs = 0;
    for (int l = 0; l < m->cfg.n_layer; l++)
        m->la[l].ntensors = 0;
    for (int i = 0; i < GPT2_NUM_ROWS; i++) {
        const ParamRow* r = &TABLE[i];
        const int first = m->nspecs;
        ASSERT(r->name != NULL); // every P_* name has its row
        m->row_spec[i] = -1;
        if (!row_present(r->when, m)) continue;
        if (r->expand) {
            r->expand(m, i);
        } else {
            size_t shape[4];
            int nd = 0;
            for (; nd < 4 && r->dims[nd] != D_END; nd++)
                shape[nd] = dim_of(r->dims[nd], &m->cfg, m->maxP);
            add_spec(m, i, r->name, nd, shape, r->decay);
        }
        if (m->nspecs > first) m->row_spec[i] = first;
    }
}

size_t gpt2_llmc_floats(const GPT2Config* cfg_in) {
    GPT2Config c1 = *cfg_in;
    c1.mlp = 1; // llm.c model files have an MLP in every block
    size_t n = 0;
    for (int i = 0; i < GPT2_NUM_ROWS; i++) {
        if (row_llmc(i) < 0) continue;
        size_t k = 1;
        for (int d = 0; d < 4 && TABLE[i].dims[d] != D_END; d++)
            k *= dim_of(TABLE[i].dims[d], &c1, 0);
        n += k;
    }
    return n;
}
