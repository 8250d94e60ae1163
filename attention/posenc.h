// attention/posenc.h: the position encodings of attention (the config key pos_encoding):
// learned absolute positions (the model's wpe, nothing here), RoPE, ALiBi, xPos and FIRE, and
// none. attention.c implements RoPE, ALiBi and xPos, fire.c FIRE; the driver applies them for
// the default pipeline and layer-level variants call them on their own projections
// (attention/layer.h: attn_pos_forward).
#ifndef ATTNLAB_ATTENTION_POSENC_H
#define ATTNLAB_ATTENTION_POSENC_H

#include <stddef.h>
#include <stdint.h>

#include "attention/real.h"
#include "attention/workspace.h"

enum {
    ATTN_POS_LEARNED,
    ATTN_POS_ROPE,
    ATTN_POS_ALIBI,
    ATTN_POS_NONE,
    ATTN_POS_XPOS,
    ATTN_POS_FIRE,
    ATTN_POS_COUNT
};

// The one spelling of each position encoding (attention.c, designated initializers), used by
// the config (model/attn_setup.c), the model files (model/checkpoint.c, model/open.c) and the
// Hugging Face config.json (model/hf.c). attn_pos_name: NULL out of range; attn_pos_from_name:
// -1 if unknown. The `pos_encoding` choices of common/config_table.c (which cannot include
// attention/) are checked against this table by tests/test_enum_names.c.
const char* attn_pos_name(int pos);
int attn_pos_from_name(const char* name);

// 1 when the encoding rotates q and k (rope, xpos): the layer then needs a (B,T,2C) qk_pos buffer
static inline int attn_pos_rotates(int pos) {
    return pos == ATTN_POS_ROPE || pos == ATTN_POS_XPOS;
}

// ---- position encodings, for the default pipeline and for layer-level variants
//
// RoPE (Su et al., RoFormer): within every head, channel pair (2i, 2i+1) of q and k at position
// t is rotated by the angle t * 10000^(-2i/hs) (interleaved pairs, as in the RoFormer paper and
// Meta's LLaMA code; GPT-NeoX pairs i with i + hs/2 instead). Scores then depend on q and k only
// through their relative position.
//
// ALiBi (Press et al. 2022): s_tj += slope_h * (j - t), slope_h = attn_alibi_slope(h, NH): the
// authors' get_slopes (ofirpress/attention_with_linear_biases: fairseq/models/transformer.py),
// 2^(-8(h+1)/NH) when NH is a power of two; otherwise the P = 2^floor(log2 NH) slopes of P heads,
// then every other slope of 2P heads (BLOOM and MPT use the same slopes). Every ALiBi user in
// attention/ and model/ calls this one function.
//
// xPos (Sun et al. 2022, "A Length-Extrapolatable Transformer", arXiv 2212.10554; the authors'
// code microsoft/torchscale: torchscale/component/xpos_relative_position.py): RoPE with an
// exponential decay. With zeta_i = (2i/hs + 0.4) / 1.4 (gamma = 0.4, scale base 512) and the
// centred position p = t - ceil(T/2) of a call of T positions (torchscale's min_pos = -T // 2;
// the rotation angle still uses t), pair i of q at position t is also multiplied by
// zeta_i^(p/512) and of k by zeta_i^(-p/512), so q_t . k_j carries zeta_i^((t - j)/512) <= 1:
// attention to distant keys decays. The scores are those of uncentred positions (the offset
// cancels); q and k themselves span zeta^(-+T/1024) instead of zeta^(-+T/512), which doubles the
// float32 range: attn_xpos_max_T() (71,388) is the longest T whose factors are all normal floats
// (the config refuses a larger block_size under xpos).
#define ATTN_XPOS_SCALE_BASE 512.0
real attn_alibi_slope(int h, int NH);
int attn_xpos_max_T(void);
// zeta_i^(p/512) for pair i of a head of size hs at centred position p (computed in double)
real attn_xpos_scale(int i, int hs, int p);
//
// attn_rope: out (row stride ldo) = R x (inverse: R^T x) for the (B,T,C) view `in` (row stride
// ldi); accumulate = 1 adds into out. out may equal in when accumulate = 0.
void attn_rope(real* out, size_t ldo, const real* in, size_t ldi, const AttnDims* d,
               AttnWorkspace* ws, int inverse, int accumulate);
// attn_xpos: as attn_rope, times zeta_i^(+p/512) for queries (is_key = 0) or zeta_i^(-p/512) for
// keys (is_key = 1), p = t - ceil(T/2) with T = d->T; inverse applies the transpose (the same
// scale with R^T).
void attn_xpos(real* out, size_t ldo, const real* in, size_t ldi, const AttnDims* d,
               AttnWorkspace* ws, int is_key, int inverse, int accumulate);
//
// attn_rope_table: the rotation table of a head of `width` channels (width even, pairs
// i < width/2) at positions t < T of a call of length T, row-major (T, width/2):
//   cs[t][i] = (real)(z cos a),  sn[t][i] = (real)(z sin a),  a = t 10000^(-2i/width),
// every factor in double and rounded once. z = 1 for xsign = 0: the RoPE table attn_rope reads
// (built by this function at width hs); xsign = +1 / -1: z = zeta_i^(+-p/512), the xPos query /
// key factor at p = t - ceil(T/2) (zeta_i of width `width`, as attn_xpos_scale), multiplied
// into cos and sin before rounding. Used with attn_rotate by variants that rotate a head of a
// width other than hs (diff: each half of a head, width hs/2). Writes 2 T width/2 reals.
void attn_rope_table(real* cs, real* sn, int T, int width, int xsign);
// attn_rotate: out (row stride ldo) = R x (inverse: R^T x; accumulate = 1 adds into out) for
// the view `in` (row stride ldi) of d->B * d->T rows of d->NH heads of d->hs channels, pair i
// of every head at row t turned by the table of attn_rope_table(cs, sn, d->T, d->hs, xsign):
//   y0 = x0 c - x1 s,  y1 = x0 s + x1 c,  c = cs[t][i],  s = sn[t][i] (-sn[t][i] for R^T)
// on nthreads threads (each row by one thread: identical for any count). The backward of
// y = R x is dx = R^T dy, the transpose (under xPos R is z times a rotation, and its transpose,
// not its inverse, is the VJP). Not attn_rope's loop: with the width-hs table both compute the
// same formula, but the compiler fuses multiply-adds in this loop and not in attn_rope's, so the
// two can differ in the last bit (attention.c).
void attn_rotate(real* out, size_t ldo, const real* in, size_t ldi, const AttnDims* d,
                 const real* cs, const real* sn, int nthreads, int inverse, int accumulate);

// Rotate rows t0..T-1 of a call of length T (d: B = 1, T, NH, hs) as the forward's position
// encoding does (attn_pos_forward: RoPE, or xPos with the call's centring), a query (is_key = 0)
// or key (is_key = 1) view; `in` and `out` hold only those rows (row t0 first). Rows rotate
// independently, so this equals rows t0.. of the whole call's rotation bit for bit. Incremental
// decoding (attention/decode.c) rotates the new position alone (RoPE; t0 = T - 1) or every
// cached position again (xPos: its scale depends on T).
void attn_pos_rotate_rows(real* out, size_t ldo, const real* in, size_t ldi, const AttnDims* d,
                          AttnWorkspace* ws, int pos_encoding, int is_key, int t0);

// 1 when variant v can run under position encoding pos. fire adds a learned bias to the
// attention logits; variants that form no logits (attn_variant.ignores_inner: linear, the
// delta-rule memories, multiscreen) refuse it.
int attn_pos_supported(const AttnVariant* v, int pos);

// ---- FIRE (attention/fire.c; Li et al. 2023, arXiv 2310.04418): the bias of head h between
// query t and key j <= t is b_h(t, j) = f_h(psi(t - j) / psi(max(L, t))), psi(x) = ln(|c| x + 1),
// L = 512 |l|, f an MLP 1 -> ATTN_FIRE_HIDDEN (ReLU) -> NH. One parameter vector per layer:
// [c, l, W1 (H), b1 (H), W2 (NH,H), b2 (NH)].
#define ATTN_FIRE_HIDDEN    32
#define ATTN_FIRE_L0        512.0
#define ATTN_FIRE_MAX_HEADS 128 // n_head beyond this is refused at setup (attn_layer_check)
int attn_fire_nparams(int NH);
// initial values from `seed`: c = 0.1, l = 1 (L = 512), the MLP as PyTorch's nn.Linear default
// (W1, b1 ~ U(-1, 1) for one input; W2, b2 ~ U(-1/sqrt(H), 1/sqrt(H)))
void attn_fire_init(real* theta, int NH, uint64_t seed);
// bias (NH,T,T): entries j <= t of every row, zeros above the diagonal
void attn_fire_bias(real* bias, const real* theta, int NH, int T, int nthreads);
// row t of every head's bias: entries j <= t of head h at bias[h*ldh + j] (equal to the table's)
void attn_fire_bias_row(real* bias, size_t ldh, const real* theta, int NH, int t);
// dtheta += dL/dtheta given dbias (B,NH,T,T) slots (entries j <= t are read); thread-invariant.
// rows: attn_fire_backward_scratch(NH, T) reals of scratch (the workspace holds them).
size_t attn_fire_backward_scratch(int NH, int T);
void attn_fire_backward(real* dtheta, const real* dbias, int B, const real* theta, int NH, int T,
                        int nthreads, real* rows);

#endif
