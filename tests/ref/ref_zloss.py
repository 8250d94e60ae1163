#!/usr/bin/python3
"""tests/ref/ref_zloss.py: an independent float64 numpy reference of the cross-entropy with z-loss
(the config key z_loss), for tests/test_stability.c.

PaLM (Chowdhery et al. 2022, Sec. 5) and Wortsman et al. 2023 (arXiv 2309.14322, Sec. 3.1.2) add
z_loss * (log Z)^2 to each token's loss, Z = sum_v exp(logit_v) over the real vocabulary. Per row:
    lse  = log sum_v exp(z_v)
    ce   = lse - z_target
    loss = ce + c lse^2
    dloss/dz_v = softmax(z)_v (1 + 2 c lse) - [v == target]
The gradient is also checked here against float64 central differences of `loss` (so the formula
above is not taken on trust); the script exits 1 if they differ by more than 1e-7.

usage: /usr/bin/python3 tests/ref/ref_zloss.py DIR
  DIR/case.json {"N", "V", "Vp", "c", "dloss", "targets": [N ints]}, DIR/logits.npy (N, Vp)
  float32; writes DIR/ref_lse.npy (N), ref_ce.npy (N), ref_zterm.npy (1: c mean lse^2) and
  ref_dlogits.npy (N, Vp: dloss times the gradient, 0 in the padded columns), computed in
  float64 and stored as float32 (common/npy reads float32).
"""
import json
import os
import sys

import numpy as np


def rows(z, targets, c):
    mx = z.max(-1, keepdims=True)
    lse = np.log(np.exp(z - mx).sum(-1)) + mx[:, 0]
    ce = lse - z[np.arange(z.shape[0]), targets]
    return lse, ce, ce + c * lse ** 2


def grad(z, targets, c):
    lse, _, _ = rows(z, targets, c)
    p = np.exp(z - lse[:, None])
    g = p * (1.0 + 2.0 * c * lse)[:, None]
    g[np.arange(z.shape[0]), targets] -= 1.0
    return g


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    with open(os.path.join(d, "case.json")) as f:
        case = json.load(f)
    N, V, Vp, c, dloss = case["N"], case["V"], case["Vp"], case["c"], case["dloss"]
    targets = np.array(case["targets"], dtype=np.int64)
    logits = np.load(os.path.join(d, "logits.npy")).astype(np.float64).reshape(N, Vp)
    z = logits[:, :V]
    lse, ce, loss = rows(z, targets, c)
    g = grad(z, targets, c)
    # the formula against central differences of the per-row loss, in float64
    h = 1e-5
    worst = 0.0
    for r in range(N):
        for v in range(V):
            zp, zm = z.copy(), z.copy()
            zp[r, v] += h
            zm[r, v] -= h
            num = (rows(zp, targets, c)[2][r] - rows(zm, targets, c)[2][r]) / (2 * h)
            worst = max(worst, abs(num - g[r, v]) / (abs(num) + abs(g[r, v]) + 1e-3))
    if worst > 1e-7:
        sys.exit(f"ref_zloss: the analytic gradient differs from finite differences ({worst:.3g})")
    dl = np.zeros((N, Vp))
    dl[:, :V] = dloss * g
    np.save(os.path.join(d, "ref_lse.npy"), lse.astype(np.float32))
    np.save(os.path.join(d, "ref_ce.npy"), ce.astype(np.float32))
    zterm = np.array([c * (lse ** 2).mean()])
    np.save(os.path.join(d, "ref_zterm.npy"), zterm.astype(np.float32))
    np.save(os.path.join(d, "ref_dlogits.npy"), dl.astype(np.float32))
    print(f"ref_zloss: {N} rows, V = {V}, c = {c}: gradient vs differences {worst:.2g}")


if __name__ == "__main__":
    main()
