#!/usr/bin/python3
"""scripts/ablate_stats.py: the statistics of a sweep's claims (scripts/ablate_claims.py).

Pure functions, no third-party module:
  t975(df)                   the two-sided 95% Student t quantile (the paired interval)
  signflip_p(d, side)        the exact paired sign-flip (permutation) p-value of per-seed
                             differences d: under the null each difference is as likely to have
                             either sign, so the 2^n sign patterns are equally likely; the
                             statistic is the sum. side "two" counts |sum| >= |observed|, "greater"
                             sum >= observed. n seeds all of one sign give 2 / 2^n two-sided
                             (0.0625 for 5 seeds), the smallest p the test can give.
  parity_p(d, tol)           the p of a parity claim `A ~ B TOL`: it can end three ways (inside
                             the tolerance: two one-sided sign-flip tests, TOST; above it; below
                             it), so its p is twice the smallest of the three one-sided p-values,
                             as a two-sided p is twice the smaller of its two one-sided ones
  holm(ps)                   Holm's step-down adjusted p-values (family-wise error control over
                             the claims of one sweep); None entries stay None
  ratio_interval(lo, hi, s)  the interval of measured/claimed from the paired interval [lo, hi]
                             and the claimed size s (a constant)
Exact enumeration up to EXACT_MAX differences; above, a Monte Carlo estimate over MC_DRAWS
random sign patterns from a fixed seed (the same number on every run).
"""
import random

ALPHA = 0.05
EXACT_MAX = 20
MC_DRAWS = 200000
# two-sided 95% Student t quantiles by degrees of freedom (df > 30: 1.96 is within 2%)
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
        9: 2.262, 10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120,
        17: 2.110, 18: 2.101, 19: 2.093, 20: 2.086, 25: 2.060, 30: 2.042}


def t975(df):
    if df in T975:
        return T975[df]
    return next((T975[k] for k in sorted(T975) if k >= df), 1.96)


def _sums(d):
    """Every sign-flipped sum of d (exact: 2^n of them), or MC_DRAWS random ones."""
    n = len(d)
    if n <= EXACT_MAX:
        sums = [0.0]
        for x in d:
            sums = [s + x for s in sums] + [s - x for s in sums]
        return sums
    rng = random.Random(1)
    return [sum(x if rng.random() < 0.5 else -x for x in d) for _ in range(MC_DRAWS)]


def signflip_p(d, side="two"):
    """The sign-flip p-value of the differences d (see the module text); None without any."""
    d = [float(x) for x in d]
    if not d:
        return None
    obs = sum(d)
    sums = _sums(d)
    eps = 1e-12 * max(1.0, sum(abs(x) for x in d))  # sums equal up to rounding count as equal
    if side == "two":
        hits = sum(1 for s in sums if abs(s) >= abs(obs) - eps)
    elif side == "greater":
        hits = sum(1 for s in sums if s >= obs - eps)
    else:
        raise ValueError("side: %r" % side)
    return hits / len(sums)


def parity_p(d, tol):
    """(p, the way it ends: "inside", "above" or "below") of `A ~ B tol` from the differences d."""
    if not d:
        return None, None
    p_inside = max(signflip_p([x + tol for x in d], "greater"),   # d > -tol
                   signflip_p([tol - x for x in d], "greater"))   # d < tol
    p_above = signflip_p([x - tol for x in d], "greater")         # d > tol
    p_below = signflip_p([-x - tol for x in d], "greater")        # d < -tol
    ways = sorted([(p_inside, "inside"), (p_above, "above"), (p_below, "below")],
                  key=lambda w: w[0])
    return min(1.0, 2.0 * ways[0][0]), ways[0][1]


def holm(ps):
    """Holm-adjusted p-values, in the order of ps; entries that are None are not in the family."""
    idx = sorted((i for i, p in enumerate(ps) if p is not None), key=lambda i: (ps[i], i))
    m = len(idx)
    out = [None] * len(ps)
    run = 0.0
    for k, i in enumerate(idx):
        run = max(run, min(1.0, (m - k) * ps[i]))
        out[i] = run
    return out


def ratio_interval(lo, hi, size):
    """[lo, hi] / size, ordered."""
    a, b = lo / size, hi / size
    return (a, b) if a <= b else (b, a)


def min_exact_p(n):
    """The smallest two-sided sign-flip p with n differences: 2 / 2^n."""
    return 2.0 / 2 ** n if n > 0 else 1.0
