#!/usr/bin/python3
"""tests/ref/ref_layers.py: independent float64 numpy references of attnlab's layer-level attention
variants, their inner row maps and the position encodings at the attention level.

Written from the formulas in VARIANTS.md and the papers (see the notes per function); nothing is
shared with the C code. Used by tests/test_ref_layers.c (one call for all cases) and, for the
attention of a whole model, by tests/ref/ref_gpt2.py.

usage:
  /usr/bin/python3 tests/ref/ref_layers.py --list      names of the layer-level variants covered
  /usr/bin/python3 tests/ref/ref_layers.py DIR         for every line of DIR/cases.jsonl read the
      inputs DIR/<id>.x.npy (B,T,C), <id>.qkv.npy (B,T,3C), <id>.rowp.npy (NH,P) when P > 0 and
      <id>.t.<name>.npy (the variant's layer tensors), <id>.fire.npy (the FIRE vector) under
      pos = fire, write <id>.ref_out.npy (B,T,C) and <id>.ref_att.npy (B,NH,T,T), float32, or
      float64 for a case with "f64": 1 (the double build of attention/).

A case line is a JSON object: id, variant, hp {name: number or choice word}, inner, inner_hp,
pos (learned | rope | alibi | none | xpos | fire), B, T, C, NH, P, tensors [names]. An unknown variant,
hyperparameter or choice word is an error naming it (exit 2).

Conventions (attention/layer.h): q, k, v at channel offsets 0, C, 2C of qkv, head h at h*hs;
scores s_tj = q_t.k_j / sqrt(hs) for j <= t (n_t = t + 1 keys); weights above the diagonal are 0.
RoPE (RoFormer): pair (2i, 2i+1) of q and k at position t is rotated by t * 10000^(-2i/hs),
(x0, x1) -> (x0 cos - x1 sin, x0 sin + x1 cos). xPos (Sun et al. 2022, arXiv 2212.10554; as the
authors' torchscale XPOS): the RoPE rotation times zeta_i^(p/512) on q and zeta_i^(-p/512) on k,
zeta_i = (2i/hs + 0.4)/1.4, p the centred position t + (-T // 2) (ref_posenc.xpos).
ALiBi: s_tj += m_h (j - t), m_h the ALiBi authors' get_slopes (ref_posenc.alibi_slopes).
FIRE (Li et al. 2023, arXiv 2310.04418, eq. for b(i, j) in Sec. 3): s_tj += f_h(psi(t - j) / psi(max(L, t))),
psi(r) = ln(c r + 1), f an MLP of the scalar with one ReLU hidden layer (32 units) and one output per
head; the vector is [c, l, W1 (32), b1 (32), W2 (NH, 32), b2 (NH)] with c used as |c| and L = 512 |l|.
A learned position embedding (and none) leaves the attention layer unchanged.
Linear weights (out, in) act as y = x W^T + b, as in PyTorch's nn.Linear.
"""
import json
import math
import os
import sys

import numpy as np

from ref_posenc import RefError, alibi_slopes, fire_bias, rope, xpos  # noqa: F401 (re-exported)
from ref_linear import v_deltanet, v_gated_deltanet, v_linear

POS = ("learned", "rope", "alibi", "none", "xpos", "fire")


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def softplus(z):
    return np.logaddexp(0.0, z)


# ---------------------------------------------------------------------------------------------
# position encodings


def rel(T):
    """(T, T) matrix j - t, and the causal mask j <= t."""
    t = np.arange(T)
    d = t[None, :] - t[:, None]
    return d, d <= 0


# ---------------------------------------------------------------------------------------------
# inner row maps on (B, NH, T, T) scores; rows t see keys j <= t; p (NH, P) per-head params


def lengths(T):
    return np.arange(1, T + 1, dtype=np.float64)[:, None]  # n_t as a (T, 1) column


def masked(S, mask, fill):
    return np.where(mask, S, fill)


def softmax_rows(Z, mask):
    Z = masked(Z, mask, -np.inf)
    Z = Z - Z.max(-1, keepdims=True)
    E = np.where(mask, np.exp(Z), 0.0)
    return E / E.sum(-1, keepdims=True)


def entmax_rows(Z, mask, alpha):
    """alpha-entmax (Peters et al. 2019): p_j = [(alpha-1) z_j - tau]_+^(1/(alpha-1)), sum p = 1.
    tau by bisection in float64 on [max z' - 1, max z' - n^(1-alpha)], z' = (alpha-1) z."""
    a1 = alpha - 1.0
    Zp = masked(Z * a1, mask, -np.inf)
    mx = Zp.max(-1, keepdims=True)
    n = mask.sum(-1, keepdims=True).astype(np.float64)
    lo, hi = mx - 1.0, mx - n ** (-a1)

    def p_of(tau):
        return np.where(mask, np.maximum(Zp - tau, 0.0), 0.0) ** (1.0 / a1)

    for _ in range(120):
        mid = 0.5 * (lo + hi)
        f = p_of(mid).sum(-1, keepdims=True) - 1.0
        lo = np.where(f > 0, mid, lo)
        hi = np.where(f > 0, hi, mid)
    p = p_of(0.5 * (lo + hi))
    return p / p.sum(-1, keepdims=True)


def hp_get(hp, name, default):
    return hp.get(name, default)


def check_keys(where, hp, known):
    for k in hp:
        if k not in known:
            raise RefError(f"{where}: the reference has no hyperparameter '{k}'")


def rowmap(name, hp, S, mask, p, T_train):
    """The registry's row maps a layer-level variant may wrap (VARIANTS.md A0, A1, A3, A7, A12)."""
    n = lengths(S.shape[-1])
    if name == "softmax":  # A0
        check_keys(name, hp, ())
        return softmax_rows(S, mask)
    if name == "ssmax":  # A1: softmax((theta_h ln n + b_h) s), b_h only with bias = learn
        check_keys(name, hp, ("theta_init", "theta0", "bias"))
        b = p[:, 1] if hp_get(hp, "bias", "off") == "learn" else np.zeros(p.shape[0])
        lam = p[:, 0][:, None, None] * np.log(n)[None] + b[:, None, None]
        return softmax_rows(lam[None] * S, mask)
    if name == "sigmoid":  # A3: sigma(s + b), bias per mode
        check_keys(name, hp, ("bias_mode", "bias"))
        mode = hp_get(hp, "bias_mode", "ln_n")
        if mode == "ln_n":
            b = -np.log(n)[None, None]
        elif mode == "ln_T":
            b = -math.log(max(T_train, 2))
        elif mode == "fixed":
            b = float(hp_get(hp, "bias", 0.0))
        elif mode == "none":
            b = 0.0
        elif mode == "learn":
            b = p[:, 0][None, :, None, None]
        else:
            raise RefError(f"sigmoid: unknown bias_mode '{mode}'")
        return np.where(mask, sigmoid(S + b), 0.0)
    if name == "relu":  # A7: ReLU(s)/n | ReLU(s) | ReLU(s)^2/n
        check_keys(name, hp, ("form",))
        return relu_form(hp_get(hp, "form", "relu_n"), S, mask)
    if name == "entmax":  # A12 at a fixed alpha
        check_keys(name, hp, ("alpha", "learn_alpha"))
        if hp_get(hp, "learn_alpha", "off") == "on":
            alpha = 1.0 + sigmoid(p[:, 0])[None, :, None, None]
        else:
            alpha = float(hp_get(hp, "alpha", 1.5))
        return entmax_rows(S, mask, alpha)
    raise RefError(f"inner row map '{name}' has no reference")


def relu_form(form, S, mask):
    n = lengths(S.shape[-1])
    r = np.where(mask, np.maximum(S, 0.0), 0.0)
    if form == "relu":
        return r
    if form == "relu_n":
        return r / n
    if form == "relu2":
        return r * r / n
    raise RefError(f"relu: unknown form '{form}'")


# ---------------------------------------------------------------------------------------------
# the layer


class Layer:
    """One case: inputs split into heads, position encoding, the inner map and its params."""

    def __init__(self, case, x, qkv, rowp, tensors, fire=None):
        self.B, self.T, self.C, self.NH = case["B"], case["T"], case["C"], case["NH"]
        self.hs = self.C // self.NH
        self.pos = case["pos"]
        if self.pos not in POS:
            raise RefError(f"unknown position encoding '{self.pos}'")
        self.hp = case.get("hp", {})
        self.inner = case.get("inner", "softmax")
        self.inner_hp = case.get("inner_hp", {})
        self.T_train = case.get("T_train", self.T)
        self.layer = case.get("layer", 0)  # 0-based layer index (diff's depth schedule)
        self.x, self.qkv, self.rowp, self.t = x, qkv, rowp, tensors
        self.dj, self.mask = rel(self.T)
        self.fire = 0.0  # additive (1, NH, T, T) logit bias under fire
        if self.pos == "fire":
            if fire is None:
                raise RefError("pos = fire without a FIRE parameter vector")
            self.fire = fire_bias(fire, self.NH, self.T)[None]

    def heads(self, a):  # (B, T, C) -> (B, NH, T, hs)
        return a.reshape(self.B, self.T, self.NH, self.hs).transpose(0, 2, 1, 3)

    def merge(self, o):  # (B, NH, T, hs) -> (B, T, C)
        return o.transpose(0, 2, 1, 3).reshape(self.B, self.T, self.C)

    def qkv_heads(self, qkv):
        C = self.C
        return self.heads(qkv[..., :C]), self.heads(qkv[..., C:2 * C]), self.heads(qkv[..., 2 * C:])

    def rotate(self, q, k):
        """q, k after the position encoding (rope, xpos rotate; the others leave them)."""
        if self.pos == "rope":
            return rope(q), rope(k)
        if self.pos == "xpos":
            return xpos(q, False), xpos(k, True)
        return q, k

    def scores_unbiased(self, q, k):
        """q.k / sqrt(hs) after the rotation, without an additive position bias."""
        q, k = self.rotate(q, k)
        return q @ k.transpose(0, 1, 3, 2) / math.sqrt(self.hs)

    def pos_bias(self):
        """The additive position bias of the logits: ALiBi m_h (j - t) or the FIRE bias, else 0."""
        if self.pos == "alibi":
            return alibi_slopes(self.NH)[None, :, None, None] * self.dj[None, None]
        return self.fire

    def scores(self, q, k):
        return self.scores_unbiased(q, k) + self.pos_bias()

    def inner_map(self, S, name=None, hp=None):
        return rowmap(name or self.inner, self.inner_hp if hp is None else hp, S, self.mask,
                      self.rowp, self.T_train)

    def core(self, q, k, v, row_scale=None):
        S = self.scores(q, k)
        if row_scale is not None:  # the row map sees row_scale_t * S_t (bias included)
            S = row_scale[..., None] * S
        A = self.inner_map(S)
        return A, A @ v

    def n(self):
        return np.arange(1, self.T + 1, dtype=np.float64)


def v_gated(L):
    """VARIANTS.md A6 (Bondarenko et al. 2023, conditional_per_token): o_i^h = G_i^h obar_i^h,
    G_i^h = sigma(w_h . x_i^h + b_h) with x_i^h the h-th hs-slice of the block input."""
    check_keys("gated", L.hp, ("gate_init",))
    q, k, v = L.qkv_heads(L.qkv)
    A, Ob = L.core(q, k, v)
    xh = L.heads(L.x)
    G = sigmoid(np.einsum("bhti,hi->bht", xh, L.t["w"]) + L.t["b"][None, :, None])
    return L.merge(G[..., None] * Ob), A


def v_affine(L):
    """VARIANTS.md A17 (Bae et al. 2026): A' = alpha_i p + beta_i, alpha_i = 2 sigma(wa_h.x_i +
    ba_h); free: beta_i = tanh(wb_h.x_i + bb_h)/n_i; tied: beta_i = (1 - alpha_i)/n_i."""
    check_keys("affine", L.hp, ("affine_beta",))
    mode = L.hp.get("affine_beta", "free")
    q, k, v = L.qkv_heads(L.qkv)
    S = L.scores(q, k)
    p = L.inner_map(S)
    n = L.n()[None, None, :]
    alpha = 2.0 * sigmoid(np.einsum("btc,hc->bht", L.x, L.t["alpha_w"]) +
                          L.t["alpha_b"][None, :, None])
    if mode == "free":
        beta = np.tanh(np.einsum("btc,hc->bht", L.x, L.t["beta_w"]) +
                       L.t["beta_b"][None, :, None]) / n
    elif mode == "tied":
        beta = (1.0 - alpha) / n
    else:
        raise RefError(f"affine: unknown affine_beta '{mode}'")
    Ap = np.where(L.mask, alpha[..., None] * p + beta[..., None], 0.0)
    return L.merge(Ap @ v), Ap


def v_asentmax(L):
    """VARIANTS.md A13 (Vasylenko et al. 2025): theta_i = delta + softplus(w_h . q_i)
    (ln n_i)^gamma_h, n clamped at 2, gamma_h = exp(log_gamma_h), q unrotated;
    A = entmax_alpha(theta_i s_i) (as_map = entmax) or inner(theta_i s_i) (as_map = inner)."""
    check_keys("asentmax", L.hp, ("as_map", "alpha", "delta"))
    q, k, v = L.qkv_heads(L.qkv)
    u = np.einsum("bhti,hi->bht", q, L.t["w"])
    lnn = np.log(np.maximum(L.n(), 2.0))[None, None, :]
    gamma = np.exp(L.t["log_gamma"])[None, :, None]
    theta = float(L.hp.get("delta", 1.0)) + softplus(u) * lnn ** gamma
    S = theta[..., None] * L.scores(q, k)
    m = L.hp.get("as_map", "entmax")
    if m == "entmax":
        A = entmax_rows(S, L.mask, float(L.hp.get("alpha", 1.5)))
    elif m == "inner":
        A = L.inner_map(S)
    else:
        raise RefError(f"asentmax: unknown as_map '{m}'")
    return L.merge(A @ v), A


def v_ssa(L):
    """VARIANTS.md A21 (Zhang et al. 2024): tau_i = 1 + tanh(tw_h . x_i) + lambda_h ln n_i,
    A = inner(tau_i s_i); value temperature v'_j = (1 + tanh(vw_h . x_j)) v_j when on."""
    check_keys("ssa", L.hp, ("ssa_value",))
    q, k, v = L.qkv_heads(L.qkv)
    tau = (1.0 + np.tanh(np.einsum("btc,hc->bht", L.x, L.t["tau_w"])) +
           L.t["tau_pos"][None, :, None] * np.log(L.n())[None, None, :])
    on = L.hp.get("ssa_value", "off")
    if on == "on":
        phi = 1.0 + np.tanh(np.einsum("btc,hc->bht", L.x, L.t["val_w"]))
        v = phi[..., None] * v
    elif on != "off":
        raise RefError(f"ssa: unknown ssa_value '{on}'")
    A, O = L.core(q, k, v, row_scale=tau)
    return L.merge(O), A


def v_rela(L):
    """VARIANTS.md A24 (Zhang, Titov, Sennrich 2021), gated RMSNorm form:
    A = ReLU(s) (or the relu_n / relu2 forms, or the inner map), obar = A v per head,
    o^h = sigma(x W_g^T)^h * g_h * obar^h / sqrt(mean_i (obar^h_i)^2 + eps)."""
    check_keys("rela", L.hp, ("rela_map", "rela_eps"))
    q, k, v = L.qkv_heads(L.qkv)
    S = L.scores(q, k)
    m = L.hp.get("rela_map", "relu")
    A = L.inner_map(S) if m == "inner" else relu_form(m, S, L.mask)
    Ob = A @ v
    eps = float(L.hp.get("rela_eps", 1e-5))
    nh = Ob / np.sqrt((Ob * Ob).mean(-1, keepdims=True) + eps)
    G = L.heads(sigmoid(L.x @ L.t["gate_w"].T))
    return L.merge(G * L.t["gain"][None, :, None, :] * nh), A


def v_boosted(L):
    """VARIANTS.md B1 (Sargolzaei 2026, BoostedCausalAttention, M = 2, kv_source = residual):
    P0 = MHA_0(x); res = x - P0; P1 = MHA_1(res) with its own projection qkv1 = res W1^T + b1;
    g = sigma([P0; P1] Wg^T + bg); out = P0 + g * P1. Both rounds: the inner map and the
    position encoding."""
    check_keys("boosted", L.hp, ())
    q, k, v = L.qkv_heads(L.qkv)
    A0, O0 = L.core(q, k, v)
    P0 = L.merge(O0)
    res = L.x - P0
    qkv1 = res @ L.t["qkvw"].T + L.t["qkvb"]
    q1, k1, v1 = L.qkv_heads(qkv1)
    _, O1 = L.core(q1, k1, v1)
    P1 = L.merge(O1)
    g = sigmoid(np.concatenate([P0, P1], -1) @ L.t["gatew"].T + L.t["gateb"])
    return P0 + g * P1, A0


def v_twicing(L):
    """VARIANTS.md B2 (Abdullaev & Nguyen 2025): O = A V + A (V - A V) = (2A - A^2) V."""
    check_keys("twicing", L.hp, ())
    q, k, v = L.qkv_heads(L.qkv)
    A, _ = L.core(q, k, v)
    A2 = 2.0 * A - A @ A
    return L.merge(A2 @ v), A


def v_talking_heads(L):
    """Shazeer et al. 2020 (arXiv 2003.02436, Alg. "talking-heads attention"), h_k = h = h_v = NH:
    J_h = q_h k_h^T / sqrt(hs) (rope / xpos rotate q, k), logits L_g = sum_h Pl[h, g] J_h, weights
    W = rowmap(L) per head, U_k = sum_g Pw[g, k] W_g, o_k = U_k v_k. The projections are stored as
    deviations from the identity, transposed as (out, in): Pl[h, g] = (I + pre)[g, h],
    Pw[g, k] = (I + post)[k, g]. Masked entries play no part (mixing is per (t, j)).
    Position bias (ALiBi, FIRE): bias_order = after adds it to the mixed logits L_g, as
    lucidrains/x-transformers x_transformers/attend.py (Attend.forward adds attn_bias after
    pre_softmax_talking_heads); before adds it to J_h, so the mixing sees it."""
    check_keys("talking_heads", L.hp, ("bias_order",))
    order = L.hp.get("bias_order", "after")
    if order not in ("after", "before"):
        raise RefError(f"talking_heads: unknown bias_order '{order}'")
    q, k, v = L.qkv_heads(L.qkv)
    bias = L.pos_bias()  # (1, NH, T, T), or 0 without a bias
    J = L.scores_unbiased(q, k) + (bias if order == "before" else 0.0)
    I = np.eye(L.NH)
    Lg = np.einsum("gh,bhtj->bgtj", I + L.t["pre"], J) + (bias if order == "after" else 0.0)
    W = L.inner_map(Lg)
    U = np.where(L.mask, np.einsum("kg,bgtj->bktj", I + L.t["post"], W), 0.0)
    return L.merge(U @ v), U


def v_diff(L):
    """Ye et al. 2024 (arXiv 2410.05258, Eq. 1-3; the authors' multihead_diffattn.py): per head,
    [q1; q2], [k1; k2] halves of d = hs/2 channels, each half its own head for RoPE/xPos (over d
    channels, as the code's 2 NH heads of d), v all hs channels:
    D = rowmap(q1 k1^T / sqrt d) - lambda rowmap(q2 k2^T / sqrt d),
    lambda = exp(lq1.lk1) - exp(lq2.lk2) + lambda_init, lambda_init = 0.8 - 0.6 exp(-0.3 (l-1))
    with l the 1-based layer (or lambda0 under lambda_mode = fixed); head output
    (1 - lambda_init) RMSNorm(D v) with learnable weight w (hs) and eps 1e-5."""
    check_keys("diff", L.hp, ("lambda_mode", "lambda0"))
    mode = L.hp.get("lambda_mode", "depth")
    if mode == "depth":
        lam0 = 0.8 - 0.6 * math.exp(-0.3 * L.layer)
    elif mode == "fixed":
        lam0 = float(L.hp.get("lambda0", 0.8))
    else:
        raise RefError(f"diff: unknown lambda_mode '{mode}'")
    t = L.t
    lam = math.exp(t["lq1"] @ t["lk1"]) - math.exp(t["lq2"] @ t["lk2"]) + lam0
    q, k, v = L.qkv_heads(L.qkv)
    d = L.hs // 2
    q1, k1 = L.rotate(q[..., :d], k[..., :d])
    q2, k2 = L.rotate(q[..., d:], k[..., d:])
    ali = 0.0
    if L.pos == "alibi":
        ali = alibi_slopes(L.NH)[None, :, None, None] * L.dj[None, None]
    S1 = q1 @ k1.transpose(0, 1, 3, 2) / math.sqrt(d) + ali + L.fire
    S2 = q2 @ k2.transpose(0, 1, 3, 2) / math.sqrt(d) + ali + L.fire
    D = np.where(L.mask, L.inner_map(S1) - lam * L.inner_map(S2), 0.0)
    U = D @ v
    o = (1.0 - lam0) * t["w"] * U / np.sqrt((U * U).mean(-1, keepdims=True) + 1e-5)
    return L.merge(o), D


def v_selective(L):
    """Leviathan et al. 2024 (arXiv 2410.02703, Sec. 3 and its code listing): with head 0's
    logits S_0 (after the causal mask): R = ReLU(S_0), R[:, 0] = 0 (<BOS> never masked),
    R = (1 - I) R (no self masking), F = cumsum over queries shifted by one (F_i = sum_{k<i} R_k),
    A_h = rowmap(S_h - F) for every head, o_h = A_h v_h."""
    check_keys("selective", L.hp, ())
    q, k, v = L.qkv_heads(L.qkv)
    S = L.scores(q, k)
    R = np.where(L.mask, np.maximum(S[:, 0], 0.0), 0.0)  # (B, T, T)
    R[:, :, 0] = 0.0
    R = R * (1.0 - np.eye(L.T))[None]
    F = np.zeros_like(R)
    F[:, 1:] = np.cumsum(R, axis=1)[:, :-1]
    A = L.inner_map(S - F[:, None])
    return L.merge(A @ v), A


def v_lucid(L):
    """VARIANTS.md B3 (Duvvuri et al. 2026, arXiv 2602.10410): O = A P V, P = (M o exp(k^ k^T /
    sqrt hs - sqrt hs))^{-1} (unit diagonal), M the causal mask, k^ = k / sqrt(mean k^2 + 1e-6) of
    the keys the attention sees (after RoPE/xPos, as the authors' code); A the inner attention.
    P V by a general dense solve (numpy.linalg.solve), not by substitution."""
    check_keys("lucid", L.hp, ())
    q, k, v = L.qkv_heads(L.qkv)
    A, _ = L.core(q, k, v)
    _, kr = L.rotate(q, k)
    kh = kr / np.sqrt((kr * kr).mean(-1, keepdims=True) + 1e-6)
    G = np.where(L.mask, np.exp(kh @ kh.transpose(0, 1, 3, 2) / math.sqrt(L.hs) -
                                math.sqrt(L.hs)), 0.0)
    return L.merge(A @ np.linalg.solve(G, v)), A


def v_multiscreen(L):
    """VARIANTS.md A22 (Nakanishi 2026, arXiv 2604.01178, as in the third-party
    dieOD/multiscreen-pytorch): unit q, k, v per head (then RoPE/xPos on q, k), s = q^.k^,
    rho = max(1 - r (1 - s), 0)^2 m (r = e^sr + 1; m = (cos(pi d / w) + 1)/2 for 0 <= d < w,
    w = e^(sw0 + sw) + 1, sw0 = linspace(0, ln T_train) over heads), times exp(-m_h d) under
    ALiBi; h = rho v^ (no row normalisation); o = e^so tanh(SiLU(x Wg^T)) tanh(|h|) h / |h|."""
    check_keys("multiscreen", L.hp, ())
    q, k, v = L.qkv_heads(L.qkv)

    def unit(z):
        return z / np.sqrt((z * z).sum(-1, keepdims=True) + 1e-12)

    q, k = L.rotate(unit(q), unit(k))
    v = unit(v)
    s = q @ k.transpose(0, 1, 3, 2)
    r = (np.exp(L.t["sr"]) + 1.0)[None, :, None, None]
    sw0 = np.linspace(0.0, math.log(max(L.T_train, 2)), L.NH) if L.NH > 1 else np.zeros(1)
    w = (np.exp(sw0 + L.t["sw"]) + 1.0)[None, :, None, None]
    d = -L.dj[None, None].astype(np.float64)
    m = np.where(d < w, 0.5 * (np.cos(math.pi * d / w) + 1.0), 0.0)
    if L.pos == "alibi":
        m = m * np.exp(-alibi_slopes(L.NH)[None, :, None, None] * d)
    rho = np.where(L.mask, np.maximum(1.0 - r * (1.0 - s), 0.0) ** 2 * m, 0.0)
    h = rho @ v
    n = np.sqrt((h * h).sum(-1, keepdims=True))
    u = np.tanh(n) * h / np.where(n > 0, n, 1.0)
    g = L.heads(L.x @ L.t["gate_w"].T)
    gate = np.tanh(g * sigmoid(g))
    o = np.exp(L.t["so"])[None, :, None, None] * gate * u
    return L.merge(o), rho


# mta: the authors' released configuration, in its own file (tests/ref/ref_mta.py)
from ref_mta import v_mta  # noqa: E402


ROW_MAPS = ("softmax", "ssmax", "sigmoid", "relu", "entmax")  # those rowmap() implements

LAYER_VARIANTS = {
    "gated": v_gated, "affine": v_affine, "asentmax": v_asentmax, "ssa": v_ssa,
    "rela": v_rela, "boosted": v_boosted, "twicing": v_twicing, "linear": v_linear,
    "talking_heads": v_talking_heads, "diff": v_diff, "selective": v_selective,
    "lucid": v_lucid, "multiscreen": v_multiscreen,
    "deltanet": v_deltanet, "gated_deltanet": v_gated_deltanet, "mta": v_mta,
}


def default_attention(L):
    """A row map as the whole attention (the default pipeline): A = map(s), O = A V."""
    q, k, v = L.qkv_heads(L.qkv)
    A, O = L.core(q, k, v)
    return L.merge(O), A


def layer_forward(case, x, qkv, rowp, tensors, fire=None):
    """out (B,T,C), att (B,NH,T,T) of one attention layer (a layer-level variant or a row map)."""
    L = Layer(case, x, qkv, rowp, tensors, fire)
    fn = LAYER_VARIANTS.get(case["variant"])
    if fn is None:
        L.inner, L.inner_hp = case["variant"], case.get("hp", {})
        return default_attention(L)
    return fn(L)


def load(path):
    return np.load(path).astype(np.float64)


def run_dir(d):
    n = 0
    with open(os.path.join(d, "cases.jsonl")) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            case = json.loads(line)
            cid = case["id"]
            if case["variant"] not in LAYER_VARIANTS and case["variant"] not in ROW_MAPS:
                raise RefError(f"cases.jsonl:{lineno}: variant '{case['variant']}' has no "
                               "reference")
            pre = os.path.join(d, cid)
            rowp = load(pre + ".rowp.npy") if case.get("P", 0) > 0 else np.zeros((case["NH"], 0))
            tensors = {nm: load(f"{pre}.t.{nm}.npy") for nm in case.get("tensors", [])}
            fire = load(pre + ".fire.npy") if case["pos"] == "fire" else None
            try:
                out, att = layer_forward(case, load(pre + ".x.npy"), load(pre + ".qkv.npy"),
                                         rowp, tensors, fire)
            except (RefError, KeyError) as e:
                raise RefError(f"cases.jsonl:{lineno} ({cid}, {case['variant']}): {e}")
            dt = np.float64 if case.get("f64") else np.float32  # f64: the double build's cases
            np.save(pre + ".ref_out.npy", out.astype(dt))
            np.save(pre + ".ref_att.npy", att.astype(dt))
            n += 1
    print(f"ref_layers: {n} cases")


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--list":
        print("\n".join(sorted(LAYER_VARIANTS)))
        return
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.stderr.write(__doc__)
        sys.exit(2)
    try:
        run_dir(sys.argv[1])
    except RefError as e:
        sys.exit(f"ref_layers: {e}")


# ---------------------------------------------------------------------------------------------
# Authors' code as the default (rela, ssa, asentmax): these entries replace the ones above, whose
# forms stay reachable through the new keys (rela_norm/rela_gate, ssa_temp = token,
# as_scale = recipe).

_v_ssa_token, _v_asentmax_recipe = v_ssa, v_asentmax


def _without(hp, key):
    return {k: v for k, v in hp.items() if k != key}


def v_rela_authors(L):
    """bzhangGo/zero modules/rela.py: o = ReLU(s) v per head, heads concatenated (C channels), then
    gated_rms_norm: scale * o * rsqrt(mean_C(o^2) + eps) * sigmoid(gate * o), eps = 1e-8;
    rela_norm = head takes the mean over each head's hs channels; rela_gate = input replaces the
    gate by sigmoid(x W_g^T) of the block input."""
    check_keys("rela", L.hp, ("rela_map", "rela_eps", "rela_norm", "rela_gate"))
    q, k, v = L.qkv_heads(L.qkv)
    S = L.scores(q, k)
    m = L.hp.get("rela_map", "relu")
    A = L.inner_map(S) if m == "inner" else relu_form(m, S, L.mask)
    O = L.merge(A @ v)  # (B, T, C)
    eps = float(L.hp.get("rela_eps", 1e-8))
    norm = L.hp.get("rela_norm", "all")
    if norm == "all":
        ms = (O * O).mean(-1, keepdims=True)
    elif norm == "head":
        Oh = O.reshape(L.B, L.T, L.NH, L.hs)
        ms = np.repeat((Oh * Oh).mean(-1), L.hs, axis=-1)
    else:
        raise RefError(f"rela: unknown rela_norm '{norm}'")
    gate = L.hp.get("rela_gate", "output")
    if gate == "output":
        G = sigmoid(L.t["gate"][None, None, :] * O)
    elif gate == "input":
        G = sigmoid(L.x @ L.t["gate_w"].T)
    else:
        raise RefError(f"rela: unknown rela_gate '{gate}'")
    scale = L.t["gain"].reshape(L.C)[None, None, :]
    return scale * O / np.sqrt(ms + eps) * G, A


def v_ssa_authors(L):
    """umich-sota/selective_attention lit_gpt/gpt_2_PTS.py (l. 106): the scaled scores times
    1 + exp(-exp(beta)) log(row length), one beta per layer, then the inner map; ssa_temp = token
    is the earlier per-head tanh form; ssa_value = on adds the value temperature."""
    check_keys("ssa", L.hp, ("ssa_value", "ssa_temp"))
    temp = L.hp.get("ssa_temp", "position")
    if temp == "token":
        L.hp = _without(L.hp, "ssa_temp")
        return _v_ssa_token(L)
    if temp != "position":
        raise RefError(f"ssa: unknown ssa_temp '{temp}'")
    q, k, v = L.qkv_heads(L.qkv)
    beta = float(L.t["beta"].reshape(-1)[0])
    tau = 1.0 + math.exp(-math.exp(beta)) * np.log(L.n())  # row length n = t + 1
    tau = np.broadcast_to(tau[None, None, :], (L.B, L.NH, L.T))
    on = L.hp.get("ssa_value", "off")
    if on == "on":
        v = (1.0 + np.tanh(np.einsum("btc,hc->bht", L.x, L.t["val_w"])))[..., None] * v
    elif on != "off":
        raise RefError(f"ssa: unknown ssa_value '{on}'")
    A, O = L.core(q, k, v, row_scale=tau)
    return L.merge(O), A


def v_asentmax_authors(L):
    """deep-spin/asentmax sparse_gemma.py _apply_length_scaling, attn_scale_type =
    adapt-softplus-tanh with projection bias: the query row times delta + softplus(x Wb^T + bb)
    * log(i + 2) ** (2 tanh(x Wg^T + bg)), i the 0-based position; then entmax_alpha (or the inner
    map). as_scale = recipe is the earlier query-projected form."""
    check_keys("asentmax", L.hp, ("as_map", "alpha", "delta", "as_scale"))
    sc = L.hp.get("as_scale", "adapt")
    if sc == "recipe":
        L.hp = _without(L.hp, "as_scale")
        return _v_asentmax_recipe(L)
    if sc != "adapt":
        raise RefError(f"asentmax: unknown as_scale '{sc}'")
    q, k, v = L.qkv_heads(L.qkv)
    beta = softplus(np.einsum("btc,hc->bht", L.x, L.t["beta_w"]) + L.t["beta_b"][None, :, None])
    gamma = 2.0 * np.tanh(np.einsum("btc,hc->bht", L.x, L.t["gamma_w"]) +
                          L.t["gamma_b"][None, :, None])
    logpos = np.log(np.arange(L.T, dtype=np.float64) + 2.0)[None, None, :]
    theta = float(L.hp.get("delta", 1.0)) + beta * logpos ** gamma
    S = theta[..., None] * L.scores(q, k)
    m = L.hp.get("as_map", "entmax")
    if m == "entmax":
        A = entmax_rows(S, L.mask, float(L.hp.get("alpha", 1.5)))
    elif m == "inner":
        A = L.inner_map(S)
    else:
        raise RefError(f"asentmax: unknown as_map '{m}'")
    return L.merge(A @ v), A


LAYER_VARIANTS.update(rela=v_rela_authors, ssa=v_ssa_authors, asentmax=v_asentmax_authors)

_rowmap_before = rowmap


def rowmap(name, hp, S, mask, p, T_train):  # noqa: F811 (adds normalized)
    """normalized (OliverRichter/normalized-attention models.py, NormalizeAttention): per causal
    row, g_h (s - mean) / (std + eps) + b_h (eps_mode = var: / sqrt(var + eps)), len_scale
    divides the standardised row by sqrt(n); gain/bias = off fix g = 1 / b = 0."""
    if name != "normalized":
        return _rowmap_before(name, hp, S, mask, p, T_train)
    check_keys(name, hp, ("eps", "gain", "len_scale", "bias", "eps_mode"))
    NH, T = S.shape[1], S.shape[-1]
    g = p[:, 0] if hp["gain"] == "learn" else np.ones(NH)
    b = p[:, 1] if hp["bias"] == "learn" else np.zeros(NH)
    A = np.zeros_like(S)
    for t in range(T):
        row = S[..., t, :t + 1]
        mu = row.mean(-1, keepdims=True)
        var = ((row - mu) ** 2).mean(-1, keepdims=True)
        if hp["eps_mode"] == "std":
            den = np.sqrt(var) + hp["eps"]
        elif hp["eps_mode"] == "var":
            den = np.sqrt(var + hp["eps"])
        else:
            raise RefError(f"normalized: unknown eps_mode '{hp['eps_mode']}'")
        x = (row - mu) / den
        if hp["len_scale"] == "inv_sqrt_n":
            x = x / math.sqrt(t + 1)
        elif hp["len_scale"] != "none":
            raise RefError(f"normalized: unknown len_scale '{hp['len_scale']}'")
        A[..., t, :t + 1] = g[None, :, None] * x + b[None, :, None]
    return A


ROW_MAPS = ROW_MAPS + ("normalized",)


if __name__ == "__main__":
    try:
        main()
    except SystemExit as e:
        if isinstance(e.code, str):
            sys.stderr.write(e.code + "\n")
            sys.exit(2)
        raise
