#!/usr/bin/python3
"""tests/ref/ref_linear.py: independent float64 numpy references of attnlab's linear-attention
layer (`linear`, every feature map and both row normalisations) and of the delta-rule memories
(`deltanet`, `gated_deltanet`), used by tests/ref/ref_layers.py (which registers them; the layer
object L, its masks and position encodings come from there).

Written from the papers and, where the variant's default follows the authors' code, from reading
that code (nothing is copied, nothing is shared with the C code):
  InLine      LeapLabTHU/InLine:models/inline_swin.py, InLineAttention.forward
  FLatten     LeapLabTHU/FLatten-Transformer:models/flatten_swin.py, FocusedLinearAttention
  Cottention  gmongaras/Cottention_Transformer:GPT_Trainer/GPTCosAttention.py, _cos_attn
  DeltaNet    fla-org/flash-linear-attention: fla/ops/delta_rule/naive.py,
              fla/ops/gated_delta_rule/naive.py (recurrences, q * d^-1/2), fla/layers/delta_net.py,
              fla/layers/gated_deltanet.py (o_norm), fla/modules/fused_norm_gate.py (swish gate)
Every formula is written in the causal form: row t sees the n_t = t + 1 keys j <= t.
"""
import math

import numpy as np

from ref_posenc import RefError, alibi_slopes


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def softplus(z):
    return np.logaddexp(0.0, z)


def check_keys(where, hp, known):
    for k in hp:
        if k not in known:
            raise RefError(f"{where}: the reference has no hyperparameter '{k}'")


def unit(z):
    return z / np.sqrt((z * z).sum(-1, keepdims=True) + 1e-6)


def focused(z, L, groups):
    """FLatten's focused map of z (B, NH, T, hs): r = ReLU(z) + 1e-6, |r| r^3 / |r^3| with both
    norms over all C channels of a position (groups = 'channels': the authors compute q.norm(dim=-1)
    on (B, N, C) before reshaping into heads) or over each head's channels ('head')."""
    r = np.maximum(z, 0.0) + 1e-6
    if groups == "channels":
        rc = L.merge(r)  # (B, T, C)
        f = np.linalg.norm(rc, axis=-1, keepdims=True) / np.linalg.norm(rc ** 3, axis=-1,
                                                                          keepdims=True)
        return L.heads(rc ** 3 * f)
    if groups == "head":
        return np.linalg.norm(r, axis=-1, keepdims=True) * r ** 3 / np.linalg.norm(
            r ** 3, axis=-1, keepdims=True)
    raise RefError(f"linear: unknown flatten_norm '{groups}'")


def v_linear(L):
    """VARIANTS.md B6, quadratic causal form: K_tj = phi(q_t).phi(k_j) w_tj, no 1/sqrt(hs);
    phi = elu+1 (Katharopoulos 2020), ReLU, ReLU with cosFormer's cos(pi (t-j) / 2M) (Qin 2022;
    M = cos_len or T), Hedgehog's [softmax(u); softmax(-u)], u = (I + W_h) x (Zhang 2024), identity
    (InLine's kernel_func default). Under ALiBi w_tj also carries exp(-m_h (t - j)).
    norm = divide: A = K / (sum_j K + eps); flatten: + n_t eps (the authors' z = 1 / (q . mean(k) +
    1e-6) with kv = k^T v / N); the signed kernels (galerkin, identity, cottention with cos_stab =
    row) A = K / n_t; cottention's default (cos_stab = value): no row normaliser, values divided by
    their own position, v_j / max((j+1)^sigmoid(c_h), 1), c_h the tensor cos_c.
    norm = subtract (InLine, Han et al. 2024): inline_scale = code, the authors' forward on the
    n_t visible keys, o = q kv scale / n + (1 - q . mean(k) scale) mean(v), scale = hs^-1/2, i.e.
    A = scale / n_t (K - mean_j K) + 1/n_t; inline_scale = paper, Eq. 5: A = K - mean_j K + 1/n_t.
    feature = galerkin (Cao 2021): K_tj = q_t . LN(k_j) w_tj, values LN(v_j), LN over a head's
    channels, eps 1e-5, no affine. feature = flatten (Han et al. 2023): focused() above, plus a
    causal depthwise convolution of v (kernel 5, per channel, with bias) added to the output.
    feature = performer (FAVOR+): phi(x) = exp(W x' - |x'|^2 / 2) / sqrt(m), x' = x / hs^(1/4),
    W (NH, m, hs) read from <id>.perf_w.npy. feature = cottention: K = x^ . y^ with x^ = x /
    sqrt(|x|^2 + 1e-6). feature = slay (Luna et al. 2026): (q^.k^)^2 / (|q^ - k^|^2 + yat_eps)."""
    check_keys("linear", L.hp, ("feature", "eps", "cos_len", "norm", "rf_m", "redraw", "yat_eps",
                                "inline_scale", "flatten_norm", "cos_stab"))
    q, k, v = L.qkv_heads(L.qkv)
    q, k = L.rotate(q, k)
    f = L.hp.get("feature", "elu1")
    phi = None
    if f == "elu1":
        def phi(z):
            return np.where(z > 0, z + 1.0, np.exp(np.minimum(z, 0.0)))
    elif f in ("relu", "cosformer"):
        def phi(z):
            return np.maximum(z, 0.0)
    elif f == "identity":
        def phi(z):
            return z
    elif f == "galerkin":
        def ln(z):
            m = z.mean(-1, keepdims=True)
            return (z - m) / np.sqrt(((z - m) ** 2).mean(-1, keepdims=True) + 1e-5)
    elif f == "flatten":
        groups = L.hp.get("flatten_norm", "channels")

        def phi(z):
            return focused(z, L, groups)
    elif f == "performer":
        W = L.t["perf_w"]  # (NH, m, hs)
        m = W.shape[1]
        rf = int(float(L.hp.get("rf_m", 0)))
        if rf not in (0, m) or (rf == 0 and m != 2 * L.hs):
            raise RefError(f"performer: {m} random features for rf_m = {rf}")

        def phi(z):
            zs = z / L.hs ** 0.25
            return np.exp(np.einsum("bhti,hmi->bhtm", zs, W)
                          - 0.5 * (zs * zs).sum(-1, keepdims=True)) / math.sqrt(m)
    elif f in ("cottention", "slay"):
        phi = unit
    elif f == "hedgehog":
        I = np.eye(L.hs)

        def phi(z):
            u = np.einsum("bhti,hji->bhtj", z, I[None] + L.t["phi_w"])
            sp = np.exp(u - u.max(-1, keepdims=True))
            sm = np.exp(-u - (-u).max(-1, keepdims=True))
            return np.concatenate([sp / sp.sum(-1, keepdims=True),
                                   sm / sm.sum(-1, keepdims=True)], -1)
    else:
        raise RefError(f"linear: unknown feature '{f}'")
    if f == "galerkin":
        K = q @ ln(k).transpose(0, 1, 3, 2)
        v = ln(v)
    elif f == "slay":
        qh, kh = phi(q), phi(k)
        dot = qh @ kh.transpose(0, 1, 3, 2)
        d2 = (qh * qh).sum(-1)[..., :, None] + (kh * kh).sum(-1)[..., None, :] - 2.0 * dot
        K = dot ** 2 / (d2 + float(L.hp.get("yat_eps", 1e-2)))
    else:
        K = phi(q) @ phi(k).transpose(0, 1, 3, 2)
    w = np.ones((L.T, L.T))[None, None]
    if f == "cosformer":
        M = float(L.hp.get("cos_len", 0.0)) or float(L.T)
        w = w * np.cos(math.pi * (-L.dj) / (2.0 * M))[None, None]
    if L.pos == "alibi":
        w = w * np.exp(alibi_slopes(L.NH)[None, :, None, None] * L.dj[None, None])
    K = np.where(L.mask, K * w, 0.0)
    stab = L.hp.get("cos_stab", "value")
    if stab not in ("value", "row"):
        raise RefError(f"linear: unknown cos_stab '{stab}'")
    vals = v
    if f == "cottention" and stab == "value":  # value / max(count^sigmoid(c), 1), count = j + 1
        expo = sigmoid(L.t["cos_c"])[None, :, None, None]
        den = np.maximum(np.arange(1, L.T + 1, dtype=np.float64)[None, None, :, None] ** expo, 1.0)
        vals = v / den
        K = K / den.transpose(0, 1, 3, 2)  # the weights the layer reports: A_tj = K_tj / den_j
    norm = L.hp.get("norm", "divide")
    n = L.n()[None, None, :, None]
    if norm == "subtract":
        mode = L.hp.get("inline_scale", "code")
        sK = K.sum(-1, keepdims=True)
        if mode == "code":  # scale / n (K - mean K) + 1/n; the output as the authors form it
            sc = L.hs ** -0.5
            A = np.where(L.mask, sc / n * (K - sK / n) + 1.0 / n, 0.0)
            kv_term = sc / n * (K @ v)  # (cottention's stabiliser is in K here)
            mean_v = np.cumsum(v, axis=2) / n
            O = kv_term + (1.0 - sc * sK / n) * mean_v
        elif mode == "paper":
            A = np.where(L.mask, K - sK / n + 1.0 / n, 0.0)
            O = A @ v
        else:
            raise RefError(f"linear: unknown inline_scale '{mode}'")
    elif norm == "divide":
        if f in ("galerkin", "identity") or (f == "cottention" and stab == "row"):
            A = K / n
        elif f == "cottention":  # the authors' causal Q (K^T V'), no row normaliser
            A = K
        elif f == "flatten":
            A = K / (K.sum(-1, keepdims=True) + n * float(L.hp.get("eps", 1e-6)))
        else:
            A = K / (K.sum(-1, keepdims=True) + float(L.hp.get("eps", 1e-6)))
        if f == "cottention" and stab == "value":
            qh, kh = unit(q), unit(k)  # o_t = sum_{j<=t} (q^_t . k^_j) v'_j
            Kc = np.where(L.mask, (qh @ kh.transpose(0, 1, 3, 2)) * w, 0.0)
            O = Kc @ vals
        else:
            O = A @ vals
    else:
        raise RefError(f"linear: unknown norm '{norm}'")
    if f == "flatten":  # causal depthwise conv on v, kernel 5: O_t,c += b_c + sum_i w_c,i v_(t-i),c
        cw, bias = L.t["dwc_w"], L.t["dwc_b"]  # (NH, hs, 5), (NH, hs)
        for i in range(cw.shape[-1]):
            shifted = np.zeros_like(v)
            shifted[:, :, i:] = v[:, :, :L.T - i]
            O = O + shifted * cw[None, :, None, :, i]
        O = O + bias[None, :, None, :]
    return L.merge(O), A


def delta_rule(q, k, v, beta, alpha):
    """S_t = alpha_t S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T, o_t = S_t q_t (Schlag 2021,
    Yang 2024), S_{-1} = 0; q, k (B,NH,T,dk), v (B,NH,T,dv), beta, alpha (B,NH,T)."""
    B, NH, T, dk = k.shape
    S = np.zeros((B, NH, v.shape[-1], dk))
    eye = np.eye(dk)
    o = np.zeros(v.shape)
    for t in range(T):
        kt = k[:, :, t]
        M = eye[None, None] - beta[:, :, t, None, None] * kt[..., :, None] * kt[..., None, :]
        S = alpha[:, :, t, None, None] * (S @ M) + \
            beta[:, :, t, None, None] * v[:, :, t, :, None] * kt[..., None, :]
        o[:, :, t] = np.einsum("bhij,bhj->bhi", S, q[:, :, t])
    return o


def v_deltanet_common(L, gated):
    """VARIANTS.md B9, after flash-linear-attention's layers. q, k L2-normalised (|x|^2 + 1e-6)
    after rope, then q times d^-1/2 (q_scale = rsqrt: the naive recurrences' `q * d_k ** -0.5`;
    one: no scale); beta_t = sigma(W_beta x_t + b); DeltaNet alpha = 1; Gated DeltaNet alpha_t =
    exp(-exp(A_log) softplus(W_a x_t + dt_b)); alibi adds the fixed decay exp(-m_h) to alpha.
    o_norm: rms (DeltaNet's default, use_gate = False): RMSNorm over each head's d channels of
    o (b, t, h, d), eps 1e-5, weight o_norm_w (d) shared by the heads; gated (GatedDeltaNet's
    default, use_gate = True): the same times swish(g) = g sigmoid(g), g = x W_g^T split into
    heads like o; none: o as read from the memory.
    att: the weights of the memory read o = A v (before the norm), found by running the same
    recurrence on v = the T x T identity (o_t is linear in v, so row t of the result is A_t.).
    attn.chunk changes only how the C layer computes the same function: the reference is always
    the step-by-step recurrence."""
    check_keys("gated_deltanet" if gated else "deltanet", L.hp, ("chunk", "q_scale", "o_norm"))
    q, k, v = L.qkv_heads(L.qkv)
    q, k = L.rotate(q, k)  # rope or xpos
    q, k = unit(q), unit(k)
    qs = L.hp.get("q_scale", "rsqrt")
    if qs == "rsqrt":
        q = q * L.hs ** -0.5
    elif qs != "one":
        raise RefError(f"deltanet: unknown q_scale '{qs}'")
    beta = sigmoid(np.einsum("btc,hc->bht", L.x, L.t["beta_w"]) + L.t["beta_b"][None, :, None])
    alpha = np.ones_like(beta)
    if gated:
        za = np.einsum("btc,hc->bht", L.x, L.t["a_w"]) + L.t["dt_b"][None, :, None]
        alpha = np.exp(-np.exp(L.t["A_log"])[None, :, None] * softplus(za))
    if L.pos == "alibi":
        alpha = alpha * np.exp(-alibi_slopes(L.NH))[None, :, None]
    o = delta_rule(q, k, v, beta, alpha)  # (B, NH, T, hs)
    eye = np.broadcast_to(np.eye(L.T), (L.B, L.NH, L.T, L.T))
    A = delta_rule(q, k, eye, beta, alpha)
    on = L.hp.get("o_norm", "gated" if gated else "rms")
    if on in ("rms", "gated"):
        o = o / np.sqrt((o * o).mean(-1, keepdims=True) + 1e-5) * L.t["o_norm_w"]
        if on == "gated":
            g = L.heads(L.x @ L.t["g_w"].T)  # g_proj, bias-free, split into heads
            o = o * g * sigmoid(g)
    elif on != "none":
        raise RefError(f"deltanet: unknown o_norm '{on}'")
    return L.merge(o), A


def v_deltanet(L):
    return v_deltanet_common(L, False)


def v_gated_deltanet(L):
    return v_deltanet_common(L, True)
