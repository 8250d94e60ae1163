#!/usr/bin/python3
"""tests/ref/ref_mta.py: an independent float64 numpy reference of attnlab's `mta` attention
(Multi-Token Attention, Golovneva et al. 2025, arXiv 2504.00927), written from the authors' code
facebookresearch/RAM:projects/mta/mta_transformer.py (Attention.forward, _mta_convolution,
_head_convolution, RMSNorm, BaseTransformer's mta_layers) and its released configs
projects/mta/configs/1B_mta.yaml and 830M_mta.yaml. Nothing is shared with the C code, and the
computation follows the authors' layout rather than attnlab's: full kernels with the identity
added back, a cross-correlation over the zero-padded map as F.conv2d does, nn.Linear over the
head axis, the head convolution as a right multiplication by the (c_h x c_h) block.

v_mta(L) is the layer function tests/ref/ref_layers.py registers for "mta" (L: its Layer object).

usage:
  /usr/bin/python3 tests/ref/ref_mta.py DIR   for every line of DIR/cases.jsonl (the format of
      tests/ref/ref_layers.py, plus "layer" and "f64": true) read DIR/<id>.x.f64, <id>.qkv.f64 and
      <id>.t.<name>.f64 (raw little-endian float64, shapes from the case: x (B,T,C), qkv (B,T,3C),
      tensor shapes in "shapes") and write <id>.ref_out.f64 (B,T,C) and <id>.ref_att.f64
      (B,NH,T,T). Used by tests/test_attn64_mta.c (the double-precision build).

attnlab's stored parameters and the authors' tensors (their names in parentheses):
  theta (NH, cq, 2w+1)      -> mta_kernel[h, 0, cq-1-a, w-b] = [a = 0, b = 0] + theta[h, a, b+w]
  theta_post                -> mta_kernel_after_sm, the same way
  pre_mix (NH, NH)          -> wpsm.weight = I + pre_mix   (nn.Linear(n_heads, n_heads))
  mix (NH, c_h)             -> head_kernel[g][m', k'] = [m' = k'] + mix[g c_h + k', m']
  gn_w (hs)                 -> subln.weight ;  gate_w (hs), gate_b (1) -> gate (Linear(hs, 1))
"""
import json
import math
import os
import sys

import numpy as np

from ref_posenc import RefError

KEYS = ("cq", "kw", "post_cq", "post_kw", "ch", "pre_mix", "conv_every", "conv_first",
        "rescale", "gate")
DEFAULTS = {"cq": 6, "kw": 5, "post_cq": 6, "post_kw": 5, "ch": 0, "pre_mix": "on",
            "conv_every": 4, "conv_first": 2, "rescale": "off", "gate": "on"}


def _flag(hp, key):
    val = hp.get(key, DEFAULTS[key])
    if val not in ("on", "off"):
        raise RefError(f"mta: attn.{key} = '{val}' is not one of off|on")
    return val == "on"


def _int(hp, key):
    return int(round(float(hp.get(key, DEFAULTS[key]))))


def authors_kernel(theta):
    """(NH, cq, ck) attnlab kernel minus identity -> the authors' (NH, 1, cq, ck) kernel."""
    nh, cq, ck = theta.shape
    K = theta[:, ::-1, ::-1].copy()
    K[:, -1, ck // 2] += 1.0  # their identity init: last query row, centre key
    return K[:, None]


def conv2d_causal(X, K):
    """_mta_convolution on (B, NH, T, T) maps X: entries above the diagonal set to 0, padded
    with cq-1 zero rows on top and (ck-1)/2 zero columns left and right, then a depthwise
    cross-correlation with K (NH, 1, cq, ck)."""
    B, NH, T, _ = X.shape
    _, _, cq, ck = K.shape
    w = (ck - 1) // 2
    causal = np.tril(np.ones((T, T), dtype=bool))
    Xp = np.zeros((B, NH, T + cq - 1, T + 2 * w))
    Xp[:, :, cq - 1:, w:w + T] = np.where(causal, X, 0.0)
    out = np.zeros((B, NH, T, T))
    for qa in range(cq):
        for kb in range(ck):
            out += K[None, :, 0, qa, kb, None, None] * Xp[:, :, qa:qa + T, kb:kb + T]
    return out


def mix_blocks(mix, NH, ch):
    """The authors' head_kernel (NH // ch, ch, ch) from attnlab's mix (NH, ch); with a smaller
    last group (attnlab only) the full (NH, NH) right-multiplication matrix is returned as one
    block."""
    H = np.zeros((NH, NH))
    for k in range(NH):
        g0 = (k // ch) * ch
        for m in range(min(ch, NH - g0)):
            H[g0 + m, k] = (1.0 if g0 + m == k else 0.0) + mix[k, m]
    return H


def v_mta(L):
    hp = L.hp
    for k in hp:
        if k not in KEYS:
            raise RefError(f"mta: the reference has no hyperparameter '{k}'")
    NH, T, hs = L.NH, L.T, L.hs
    ch = _int(hp, "ch")
    if ch <= 0 or ch > NH:
        ch = NH
    every, first = _int(hp, "conv_every"), _int(hp, "conv_first")
    # BaseTransformer: key-query convolutions only in mta_layers ("2,6,10,..." = first + n every)
    conv_layer = L.layer >= first and (L.layer - first) % every == 0
    q, k, v = L.qkv_heads(L.qkv)
    causal = np.tril(np.ones((T, T), dtype=bool))
    mask = np.where(causal, 0.0, -np.inf)  # _update_mask: -inf above the diagonal
    scores = L.scores(q, k)
    if conv_layer and _int(hp, "cq") > 0:
        scores = conv2d_causal(scores, authors_kernel(L.t["theta"]))
    if _flag(hp, "pre_mix"):
        wpsm = np.eye(NH) + L.t["pre_mix"]  # nn.Linear weight (out, in) over the head axis
        scores = np.einsum("bmtj,km->bktj", scores, wpsm)
    Z = scores + mask
    Z = Z - Z.max(-1, keepdims=True)
    E = np.exp(Z)
    P = E / E.sum(-1, keepdims=True)
    if conv_layer and _int(hp, "post_cq") > 0:
        P = conv2d_causal(P, authors_kernel(L.t["theta_post"]))
        P = np.where(causal, P, 0.0)
    H = mix_blocks(L.t["mix"], NH, ch)  # scores_new = scores^T @ head_kernel, per group
    W = np.einsum("bmtj,mn->bntj", P, H)
    U = W @ v  # (B, NH, T, hs)
    y = U / np.sqrt((U * U).mean(-1, keepdims=True) + 1e-5) * L.t["gn_w"]
    if _flag(hp, "rescale"):  # layer_norm_rescale (difformer)
        y = y * (1.0 - (0.8 - 0.6 * math.exp(-0.3 * L.layer)))
    if _flag(hp, "gate"):  # add_gating, gate_1d: Linear(head_dim, 1) then sigmoid
        z = y @ L.t["gate_w"] + L.t["gate_b"][0]
        y = y / (1.0 + np.exp(-z))[..., None]
    return L.merge(y), W


def run_dir(d):
    import ref_layers  # the Layer class (position encodings), imported only for this mode

    n = 0
    with open(os.path.join(d, "cases.jsonl")) as f:
        for lineno, line in enumerate(f, 1):
            case = json.loads(line)
            if case.get("variant") != "mta":
                raise RefError(f"cases.jsonl:{lineno}: variant '{case.get('variant')}' is not mta")
            pre = os.path.join(d, case["id"])
            B, T, C, NH = case["B"], case["T"], case["C"], case["NH"]

            def load(name, shape):
                a = np.fromfile(f"{pre}.{name}.f64", dtype="<f8")
                if a.size != int(np.prod(shape)):
                    raise RefError(f"{pre}.{name}.f64: {a.size} values, expected {shape}")
                return a.reshape(shape)

            tensors = {nm: load("t." + nm, tuple(case["shapes"][nm])) for nm in case["tensors"]}
            L = ref_layers.Layer(case, load("x", (B, T, C)), load("qkv", (B, T, 3 * C)),
                                 np.zeros((NH, 0)), tensors)
            try:
                out, att = v_mta(L)
            except (RefError, KeyError) as e:
                raise RefError(f"cases.jsonl:{lineno} ({case['id']}): {e}")
            out.astype("<f8").tofile(pre + ".ref_out.f64")
            att.astype("<f8").tofile(pre + ".ref_att.f64")
            n += 1
    print(f"ref_mta: {n} cases")


if __name__ == "__main__":
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.stderr.write(__doc__)
        sys.exit(2)
    try:
        run_dir(sys.argv[1])
    except RefError as e:
        sys.stderr.write(f"ref_mta: {e}\n")
        sys.exit(2)
