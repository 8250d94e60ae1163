#!/usr/bin/python3
"""scripts/ref_posenc.py: independent float64 numpy references of attnlab's position encodings at
the attention level (RoPE, xPos, ALiBi slopes, the FIRE bias), written from the papers; used by
scripts/ref_layers.py (and through it scripts/ref_gpt2.py). Nothing is shared with the C code."""
import numpy as np

FIRE_H = 32  # FIRE's hidden width


class RefError(Exception):
    pass


def rope(x):
    """x (B, NH, T, hs): rotate interleaved pairs by t * 10000^(-2i/hs) (RoFormer eq. 13-15)."""
    T, hs = x.shape[2], x.shape[3]
    theta = 10000.0 ** (-2.0 * np.arange(hs // 2) / hs)
    ang = np.arange(T)[:, None] * theta[None, :]  # (T, hs/2)
    c, s = np.cos(ang), np.sin(ang)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = x0 * c - x1 * s
    out[..., 1::2] = x0 * s + x1 * c
    return out


def xpos(x, is_key):
    """x (B, NH, T, hs): RoPE, then pair i of position t scaled by zeta_i^(+-t/512) (xPos eq. in
    Sec. 3.2: q_n zeta^(n/B), k_m zeta^(-m/B), zeta_i = (i/(d/2) + gamma)/(1 + gamma))."""
    T, hs = x.shape[2], x.shape[3]
    zeta = (2.0 * np.arange(hs // 2) / hs + 0.4) / 1.4
    sc = zeta[None, :] ** ((-1.0 if is_key else 1.0) * np.arange(T)[:, None] / 512.0)  # (T, hs/2)
    return rope(x) * np.repeat(sc, 2, axis=1)


def alibi_slopes(NH):
    """Press et al., ALiBi: the geometric sequence 2^(-8/NH), 2^(-16/NH), ..."""
    return 2.0 ** (-8.0 * (np.arange(NH) + 1) / NH)


def fire_bias(theta, NH, T):
    """(NH, T, T) FIRE bias b_h(t, j) for j <= t (0 above the diagonal), from the paper's formula:
    x = psi(t - j) / psi(max(L, t)) in [0, 1], b = W2 relu(W1 x + b1) + b2."""
    H = FIRE_H
    if theta.shape != (2 + 2 * H + NH * H + NH,):
        raise RefError(f"fire: parameter vector of shape {theta.shape} for NH = {NH}")
    c, L = abs(theta[0]), 512.0 * abs(theta[1])
    W1, b1 = theta[2:2 + H], theta[2 + H:2 + 2 * H]
    W2 = theta[2 + 2 * H:2 + 2 * H + NH * H].reshape(NH, H)
    b2 = theta[2 + 2 * H + NH * H:]
    t = np.arange(T, dtype=np.float64)
    r = t[:, None] - t[None, :]
    x = np.log(c * np.maximum(r, 0.0) + 1.0) / np.log(c * np.maximum(L, t) + 1.0)[:, None]
    g = np.maximum(x[..., None] * W1 + b1, 0.0)  # (T, T, H)
    b = (g @ W2.T + b2).transpose(2, 0, 1)       # (NH, T, T)
    return np.where((r >= 0)[None], b, 0.0)
