#!/usr/bin/python3
"""tests/ref/ref_posenc.py: independent float64 numpy references of attnlab's position encodings at
the attention level (RoPE, xPos, ALiBi slopes, the FIRE bias), written from the papers and the
authors' code named per function; used by tests/ref/ref_layers.py (and through it
tests/ref/ref_gpt2.py). Nothing is shared with the C code.

usage (for the C suites, which compare single numbers):
  /usr/bin/python3 tests/ref/ref_posenc.py slopes NH [NH ...]   one line per NH: its slopes
  /usr/bin/python3 tests/ref/ref_posenc.py xpos_scale HS P [P ...]
      one line per position P: zeta_i^(P/512) for the pairs i < HS/2
  /usr/bin/python3 tests/ref/ref_posenc.py xpos_max_T   the longest T whose xPos factors (and their
      reciprocals) at every centred position are normal float32 numbers
Values are printed with repr (17 significant digits)."""
import math
import sys

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


def xpos_positions(T):
    """Centred positions of a call of length T, as torchscale's XPOS.forward (offset 0):
    min_pos = -(length) // 2 in Python's floor division, positions min_pos .. min_pos + T - 1."""
    min_pos = (-T) // 2
    return np.arange(min_pos, min_pos + T, dtype=np.float64)


def xpos_zeta(hs):
    """torchscale's scale buffer: (arange(0, hs, 2) + 0.4 hs) / (1.4 hs), one per pair."""
    return (np.arange(0, hs, 2, dtype=np.float64) + 0.4 * hs) / (1.4 * hs)


def xpos(x, is_key):
    """x (B, NH, T, hs): xPos as microsoft/torchscale torchscale/component/xpos_relative_position.py
    (XPOS, scale_base 512): the rotation of position t = 0 .. T-1 (fixed_pos_embedding takes
    arange(seq_len), rotate_every_two pairs (2i, 2i+1)), every sine and cosine times
    zeta_i^(p/512) at the centred position p for q, and 1/zeta_i^(p/512) (downscale) for k."""
    T, hs = x.shape[2], x.shape[3]
    sc = xpos_zeta(hs)[None, :] ** (xpos_positions(T)[:, None] / 512.0)  # (T, hs/2)
    if is_key:
        sc = 1.0 / sc
    return rope(x) * np.repeat(sc, 2, axis=1)


def xpos_max_T():
    """Largest T for which every factor zeta_i^(+-p/512) over the centred positions of a call of
    length T lies in float32's normal range [2^-126, FLT_MAX]: the extreme is zeta_0 = 0.4/1.4 at
    p = min_pos = -ceil(T/2) (the factor there and its reciprocal). Found by direct search on the
    float64 values rather than from a closed form."""
    zeta0 = 0.4 / 1.4
    tiny, huge = 2.0 ** -126, float(np.finfo(np.float32).max)

    def ok(T):
        p = -((T + 1) // 2)
        f = zeta0 ** (p / 512.0)
        return tiny <= 1.0 / f and f <= huge and tiny <= f and 1.0 / f <= huge

    T = 1
    while ok(2 * T):
        T *= 2
    lo, hi = T, 2 * T  # ok(lo), not ok(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def _slopes_power_of_two(n):
    start = 2.0 ** (-(2.0 ** -(math.log2(n) - 3)))  # 2^(-8/n)
    return [start * start ** i for i in range(n)]


def alibi_slopes(NH):
    """ALiBi slopes as the authors' get_slopes (ofirpress/attention_with_linear_biases,
    fairseq/models/transformer.py): for a power of two n the geometric sequence starting at
    2^(-8/n) with that ratio; otherwise the slopes of the closest lower power of two P, followed by
    every other slope (even indices) of 2P heads, as many as needed."""
    def get(n):
        if math.log2(n).is_integer():
            return _slopes_power_of_two(n)
        P = 2 ** math.floor(math.log2(n))
        return _slopes_power_of_two(P) + get(2 * P)[0::2][:n - P]
    return np.array(get(NH), dtype=np.float64)


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


def main(argv):
    if not argv:
        raise RefError("usage: ref_posenc.py slopes NH ... | xpos_scale HS P ... | xpos_max_T")
    cmd, args = argv[0], argv[1:]
    if cmd == "slopes":
        for a in args:
            print(" ".join(repr(float(m)) for m in alibi_slopes(int(a))))
    elif cmd == "xpos_scale":
        hs = int(args[0])
        for a in args[1:]:
            print(" ".join(repr(float(z)) for z in xpos_zeta(hs) ** (int(a) / 512.0)))
    elif cmd == "xpos_max_T":
        print(xpos_max_T())
    else:
        raise RefError(f"unknown command '{cmd}'")


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except (RefError, ValueError, IndexError) as e:
        print(f"ref_posenc.py: {e}", file=sys.stderr)
        sys.exit(2)
