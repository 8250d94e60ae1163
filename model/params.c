// model/params.c: the declarative table of GPT-2's base parameter tensors (shape, init, weight
// decay, Hugging Face and llm.c names, whether a matmul writes the whole gradient), resolved
// against a config into the model's ParamSpec list. Init, checkpoints, the optimizer, metrics and
// the exporters all read that list (model/gpt2.h); variant and residual-path tensors are added
// after the base rows by gpt2_build.
#include "model/params.h"

#include <string.h>

#include "common/util.h"

// Symbolic sizes of the base rows, resolved against the config by dim_of.
enum { D_VP, D_MAXT, D_L, D_LM, D_C, D_3C, D_4C };

static size_t dim_of(int d, const GPT2Config* c) {
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
    default:
        return 4 * C;
    }
}

// The base rows: GPT-2's tensors (llm.c's ParameterTensors names). Stacked rows have n_layer
// first (D_L). Init: N(0, 0.02) for the embeddings and the matrices that read the residual
// stream, N(0, 0.02/sqrt(2L)) for the two projections that write into it (GPT-2's scaled
// residual init), LayerNorm gains 1, biases 0. Weight decay on the matrices and embeddings only.
// hf: the Hugging Face GPT2LMHeadModel name; Conv1D weights are stored (in, out) there.
typedef struct {
    const char* name;
    int ndim, dims[3];
    int stacked, init, decay, vocab_rows;
    const char* hf;
    int hf_transpose;
    int llmc;    // slot in llm.c's file
    int mm_grad; // the gradient is a weight-gradient matmul's output (ParamSpec.mm_grad)
} ParamRow;

// {name, ndim, dims, stacked, init, decay, vocab_rows, hf, hf_transpose, llmc, mm_grad}
static const ParamRow GPT2_TABLE[GPT2_NUM_LLMC] = {
    [P_WTE] = {"wte", 2, {D_VP, D_C}, 0, PINIT_NORMAL, 1, 1, "wte.weight", 0, 0, 1},
    [P_WPE] = {"wpe", 2, {D_MAXT, D_C}, 0, PINIT_NORMAL, 1, 0, "wpe.weight", 0, 1, 0},
    [P_LN1W] = {"ln1w", 2, {D_L, D_C}, 1, PINIT_ONES, 0, 0, "ln_1.weight", 0, 2, 0},
    [P_LN1B] = {"ln1b", 2, {D_L, D_C}, 1, PINIT_ZERO, 0, 0, "ln_1.bias", 0, 3, 0},
    [P_QKVW] = {"qkvw", 3, {D_L, D_3C, D_C}, 1, PINIT_NORMAL, 1, 0, "attn.c_attn.weight", 1, 4, 1},
    [P_QKVB] = {"qkvb", 2, {D_L, D_3C}, 1, PINIT_ZERO, 0, 0, "attn.c_attn.bias", 0, 5, 0},
    [P_ATTPROJW] =
        {"attprojw", 3, {D_L, D_C, D_C}, 1, PINIT_RESID, 1, 0, "attn.c_proj.weight", 1, 6, 1},
    [P_ATTPROJB] = {"attprojb", 2, {D_L, D_C}, 1, PINIT_ZERO, 0, 0, "attn.c_proj.bias", 0, 7, 0},
    [P_LN2W] = {"ln2w", 2, {D_LM, D_C}, 1, PINIT_ONES, 0, 0, "ln_2.weight", 0, 8, 0},
    [P_LN2B] = {"ln2b", 2, {D_LM, D_C}, 1, PINIT_ZERO, 0, 0, "ln_2.bias", 0, 9, 0},
    [P_FCW] = {"fcw", 3, {D_LM, D_4C, D_C}, 1, PINIT_NORMAL, 1, 0, "mlp.c_fc.weight", 1, 10, 1},
    [P_FCB] = {"fcb", 2, {D_LM, D_4C}, 1, PINIT_ZERO, 0, 0, "mlp.c_fc.bias", 0, 11, 0},
    [P_FCPROJW] =
        {"fcprojw", 3, {D_LM, D_C, D_4C}, 1, PINIT_RESID, 1, 0, "mlp.c_proj.weight", 1, 12, 1},
    [P_FCPROJB] = {"fcprojb", 2, {D_LM, D_C}, 1, PINIT_ZERO, 0, 0, "mlp.c_proj.bias", 0, 13, 0},
    [P_LNFW] = {"lnfw", 1, {D_C}, 0, PINIT_ONES, 0, 0, "ln_f.weight", 0, 14, 0},
    [P_LNFB] = {"lnfb", 1, {D_C}, 0, PINIT_ZERO, 0, 0, "ln_f.bias", 0, 15, 0},
};

ParamSpec* gpt2_add_spec(GPT2* m, const char* name, int ndim, const size_t* shape, int stacked,
                         int init, int decay) {
    ASSERT(m->nspecs < GPT2_MAX_SPECS);
    ParamSpec* s = &m->specs[m->nspecs++];
    memset(s, 0, sizeof(*s));
    util_strlcpy(s->name, name, sizeof(s->name));
    s->ndim = ndim;
    s->size = 1;
    for (int i = 0; i < ndim; i++) {
        s->shape[i] = shape[i];
        s->size *= shape[i];
    }
    s->stacked = stacked;
    s->init = init;
    s->decay = decay;
    s->llmc = -1;
    return s;
}

void gpt2_add_base_specs(GPT2* m) {
    for (int i = 0; i < GPT2_NUM_LLMC; i++) {
        const ParamRow* r = &GPT2_TABLE[i];
        size_t shape[3];
        for (int d = 0; d < r->ndim; d++)
            shape[d] = dim_of(r->dims[d], &m->cfg);
        ParamSpec* s = gpt2_add_spec(m, r->name, r->ndim, shape, r->stacked, r->init, r->decay);
        s->vocab_rows = r->vocab_rows;
        s->hf = r->hf;
        s->hf_transpose = r->hf_transpose;
        s->llmc = r->llmc;
        s->mm_grad = r->mm_grad;
    }
}

size_t gpt2_llmc_floats(const GPT2Config* cfg_in) {
    GPT2Config c1 = *cfg_in;
    c1.mlp = 1; // llm.c model files have an MLP in every block
    const GPT2Config* cfg = &c1;
    size_t n = 0;
    for (int i = 0; i < GPT2_NUM_LLMC; i++) {
        size_t k = 1;
        for (int d = 0; d < GPT2_TABLE[i].ndim; d++)
            k *= dim_of(GPT2_TABLE[i].dims[d], cfg);
        n += GPT2_TABLE[i].llmc >= 0 ? k : 0;
    }
    return n;
}
