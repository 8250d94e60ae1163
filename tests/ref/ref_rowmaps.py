#!/usr/bin/python3
"""tests/ref/ref_rowmaps.py DIR: an independent float64 numpy reference of every attention row map.

Written from /work/shared/VARIANTS.md (section A), the papers it cites and the documented
interpretation choices of the user documentation (README "Attention variants" sections); it does
not follow the C code. tests/test_ref_rowmaps.c writes a batch of cases into DIR, runs this script
once, and compares the C forward with what it writes back.

Input (written by the C suite):
  DIR/manifest.txt  one record per line, whitespace-separated key=value tokens:
    spec  variant=V name=NAME def=X choices=a|b|-     a declared hyperparameter (default check)
    init  variant=V id=I Ttrain=.. NH=.. hs=.. C=.. h=.. hp.NAME=VALUE ... P=k
          the variant's init_params for these hyperparameters (P = params per head)
    case  variant=V id=I n=.. T=.. Ttrain=.. NH=.. hs=.. C=.. h=.. step=.. kind=det|stoch|wstoch
          stat=0|1 [wobs=W] hp.NAME=VALUE ... p=x,y,..  off=O   one causal row of length n whose scores
          (and key norms |k_j|^2) are s.f32[off:off+n], ksq.f32[off:off+n]
    Numbers are float32 values printed with 9 significant digits (exact round trip); choice
    hyperparameters are given by their word.
  DIR/s.f32, DIR/ksq.f32  little-endian float32, all rows back to back.
Output:
  DIR/ref.f64   per case, in manifest order, 3n + 3 float64: ref, lo, hi with lo <= ref <= hi,
                then the row statistic (value, lo, hi; NaN unless stat=1). The
                C weight a_j passes if it lies in [lo_j, hi_j] widened by the tolerance at
                ref_j. lo/hi differ from ref only for the quantizers, where an entry within
                float rounding of a rounding boundary may go either way: [lo, hi] encloses
                every such outcome, including its effect on a normalised row. kind=stoch (stochastic rounding at a training step): ref =
                the expectation p, lo/hi = the two grid neighbours of p. kind=wstoch (stochastic
                window): the C suite passes the support size it observed (wobs); ref is the
                softmax over the last wobs keys, or NaN if no window in the documented range
                gives that support.
  DIR/init.f64  per init record, P float64 (NaN = parameter unused in this configuration).
  DIR/status.txt  one line per problem: "noref V" (registered row map without a reference
                entry), "nohp V NAME" (a hyperparameter this reference does not know),
                "default V NAME expected X got Y", "choices V NAME expected a|b got c|d",
                "nostat V" (a row statistic without a reference).
Exit code 0 when the files were written (problems are reported in status.txt), 2 on bad input.
"""
import math
import os
import sys

try:
    import numpy as np
except ImportError:
    sys.stderr.write("ref_rowmaps.py: numpy is missing: apt-get install python3-numpy\n")
    sys.exit(3)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_posenc import alibi_slopes  # noqa: E402 (the ALiBi authors' slopes, for swat's alibi mode)

LN2E = 1.0 / math.log(2.0)  # log2(e)
F32_EPS = 2.0 ** -24  # unit roundoff of float32


def ln_ttrain(c):
    """ln T_train, with T_train below 2 treated as 2 (documented rule)."""
    return math.log(max(c["Ttrain"], 2))


def softmax(z):
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max())
    return e / e.sum()


def relu(x):
    return np.maximum(x, 0.0)


def softplus(x):
    return np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))


def sigmoid(x):
    """logistic in a form with full float64 relative precision for every x (exp of -log(1 + e^-x));
    0.5 (1 + tanh(x/2)) cancels to ~1e-5 relative near 1e-13."""
    return np.exp(-np.logaddexp(0.0, -np.asarray(x, dtype=np.float64)))


def row_len(c):
    return c["n"]


# ---------------------------------------------------------------------------------------------
# Row maps. Each takes (s, c) with s the float64 row and c the case (hyperparameters in c["hp"],
# per-head parameters in c["p"], key norms in c["ksq"]) and returns a, or (a, lo, hi).


def rm_softmax(s, c):  # A0
    return softmax(s)


def rm_cog(s, c):  # A10: sign(s) softmax(|s|)
    return np.sign(s) * softmax(np.abs(s))


def entmax_bisect(z, alpha):
    """alpha-entmax (Peters et al. 2019) by bisection on tau in float64:
    p_j = [(alpha-1) z_j - tau]_+^(1/(alpha-1)), sum p = 1."""
    x = (alpha - 1.0) * (z - z.max())
    b = 1.0 / (alpha - 1.0)
    lo, hi = -1.0, 0.0  # f(lo) >= 1 (the max term is 1), f(0) = 0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if (relu(x - mid) ** b).sum() >= 1.0:
            lo = mid
        else:
            hi = mid
    p = relu(x - lo) ** b
    return p / p.sum(), x - lo


def sparsemax_sort(z):
    """Martins & Astudillo 2016, Algorithm 1 (sort-based projection onto the simplex)."""
    zs = np.sort(z)[::-1]
    cs = np.cumsum(zs)
    k = np.arange(1, len(z) + 1)
    support = 1.0 + k * zs > cs
    kstar = k[support][-1]
    tau = (cs[kstar - 1] - 1.0) / kstar
    return relu(z - tau), z - tau


def rm_entmax(s, c):  # A12
    hp, p = c["hp"], c["p"]
    if hp["learn_alpha"] == "on":
        alpha = 1.0 + 1.0 / (1.0 + math.exp(-p[0]))  # alpha = 1 + sigmoid(raw)
    else:
        alpha = hp["alpha"]
    a, margin = sparsemax_sort(s) if alpha == 2.0 else entmax_bisect(s, alpha)
    c["margin"] = margin
    return a


def rm_sparsemax(s, c):
    a, c["margin"] = sparsemax_sort(s)
    return a


def quantize_rows(x, L, margin_rel):
    """nearest rounding on the grid k/L: (q, qlo, qhi); entries within float rounding of a
    half-way point go down in qlo and up in qhi."""
    y = x * L
    q = np.floor(y + 0.5)
    frac = y - np.floor(y)
    amb = np.abs(frac - 0.5) <= margin_rel * np.maximum(1.0, y)
    qlo = np.where(amb, np.floor(y), q)
    qhi = np.where(amb, np.floor(y) + 1.0, q)
    return q / L, qlo / L, qhi / L


def normalise_enclosure(q, qlo, qhi, s):
    """w / sum w for the nearest row q, and an enclosure [lo, hi] of w_C / sum w_C over every
    row w_C with qlo <= w_C <= qhi entrywise (a zero row becomes one-hot at the first max)."""
    def norm(w):
        if w.sum() == 0.0:
            w = np.zeros_like(w)
            w[int(np.argmax(s))] = 1.0
        return w / w.sum()
    if qlo.sum() == 0.0:
        return norm(q), np.zeros_like(q), np.ones_like(q)
    return norm(q), qlo / qhi.sum(), qhi / qlo.sum()


def rm_quantized(s, c):  # A14
    hp = c["hp"]
    K = hp["levels"]
    L = K - 1.0 if hp["grid"] == "levels" else K
    pre = hp["ste"] == "pre"
    x = np.exp(s - s.max()) if pre else softmax(s)
    if c["kind"] == "stoch":  # unbiased stochastic rounding floor(xL + u): E = x
        return x, np.floor(x * L) / L, np.ceil(x * L) / L
    q, qlo, qhi = quantize_rows(x, L, 2e-6)
    if pre or hp["renorm"] == "on":
        return normalise_enclosure(q, qlo, qhi, s)
    return q, qlo, qhi


def rm_pot(s, c):  # A15
    hp = c["hp"]
    r = hp["frac_bits"]
    step = 2.0 ** r
    t = LN2E * (s - s.max()) * step
    if hp["round"] == "nearest":
        q = np.floor(t + 0.5)
        frac = t - np.floor(t)
        amb = np.abs(frac - 0.5) <= 1e-6 * np.maximum(1.0, np.abs(t))
        qlo, qhi = np.where(amb, np.floor(t), q), np.where(amb, np.floor(t) + 1.0, q)
    else:
        q = np.floor(t)
        near = np.abs(t - np.round(t)) <= 1e-6 * np.maximum(1.0, np.abs(t))
        near &= t != 0.0
        qlo, qhi = np.where(near, np.round(t) - 1.0, q), np.where(near, np.round(t), q)
    def weights(qq):
        w = 2.0 ** (qq / step)
        w[qq / step < -126] = 0.0  # weights below 2^-126 of the max are dropped (documented)
        return w
    return normalise_enclosure(weights(q), weights(qlo), weights(qhi), s)


def rm_hccs(s, c):  # A16
    hp, p = c["hp"], c["p"]
    if hp["learn"] == "on":
        alpha, beta = p[0], math.exp(p[1])
    else:
        alpha, beta = hp["alpha_init"], hp["beta_init"]
    m = s.max()
    e = np.clip(alpha + beta * (s - m), 0.0, 1.0)
    if e.sum() == 0.0:  # alpha <= 0: limit alpha -> 0+, uniform over the maxima
        e = (s == m).astype(np.float64)
    return e / e.sum()


def rm_multimax(s, c):  # A18
    t, r = c["p"][0:4], c["p"][4:8]
    z = (s + t[0] * relu(r[0] - s) + t[1] * relu(s - r[1]) + t[2] * relu(r[2] - s) ** 2
         + t[3] * relu(s - r[3]) ** 2)
    a = softmax(z)
    # z has float32 rounding of order eps |z| that no float implementation avoids; with large
    # t, |r| it is amplified (|z| ~ t (s - r)^2): widen by da_j = a_j eps (|z_j| + max |z|).
    slack = a * 4.0 * F32_EPS * (np.abs(z) + np.abs(z).max())
    return a, a - slack, a + slack


def rm_softplus(s, c):  # A19 (LSSA, LSSAR)
    hp = c["hp"]
    n = row_len(c)
    nref = hp["n_ref"]
    lnref = ln_ttrain(c) if nref in (0.0, 1.0) else math.log(nref)
    kappa = math.log(n) / lnref if hp["length_scale"] == "log" else 1.0
    e = softplus(kappa * s)
    a = e / e.sum()
    if hp["reweight"] == "power":
        a = a ** hp["power"]
        a = a / a.sum()
    return a


def swat_slope(h, H):
    """SWAT's own geometric slopes for any H (Fzkuji/swat-attention, fla/layers/swat_attn.py,
    get_alibi_slope: 1 / (2^8)^((i+1)/H))."""
    return 2.0 ** (-8.0 * (h + 1) / H)


def rm_swat(s, c):  # A30 (SWAT: sigmoid, sliding window, balanced ALiBi)
    hp, n, h, H = c["hp"], row_len(c), c["h"], c["NH"]
    w = hp["window"]
    if hp["slopes"] == "balanced":
        P = (H + 1) // 2
        m = swat_slope(h, P) if h < P else -swat_slope(h - P, P)
    elif hp["slopes"] == "alibi":  # standard ALiBi: the ALiBi authors' get_slopes
        m = alibi_slopes(H)[h]
    else:
        m = 0.0
    if hp["bias"] == "none":
        b = 0.0
    elif hp["bias"] == "fixed":
        b = -math.log(min(w, max(c["Ttrain"], 2)))
    else:
        b = c["p"][0]
    t = n - 1
    j = np.arange(n, dtype=np.float64)
    a = sigmoid(s + m * (j - t) + b)
    a[j <= t - w] = 0.0
    return a


def rm_slowgrow(s, c):  # A23
    hp = c["hp"]
    pdeg = hp["degree"]
    if hp["kernel"] == "poly":
        logk = np.sign(s) * pdeg * np.log1p(np.abs(s))
    elif hp["kernel"] == "log":
        logk = np.sign(s) * pdeg * np.log1p(np.log1p(np.abs(s)))
    else:  # 1 + ELU(s)
        logk = np.where(s > 0, np.log1p(np.maximum(s, 0.0)), np.minimum(s, 0.0))
    return softmax(logk)  # kappa / sum kappa


def standardise(x, eps):
    mu = x.mean()
    var = ((x - mu) ** 2).mean()  # population variance over the causal row
    return (x - mu) / math.sqrt(var + eps)


def rm_normalized(s, c):  # A26, OliverRichter/normalized-attention:models.py
    """NormalizeAttention: a = gain_h (s - mean) / (std + eps) + bias_h over the row (population
    std, normalize_masked's sqrt(sum centered^2 / counts) + 1e-3); eps_mode = var divides by
    sqrt(var + eps) instead; gain/bias = off fix them at 1/0; len_scale divides x by sqrt(n)."""
    hp, n = c["hp"], row_len(c)
    mu = s.mean()
    var = ((s - mu) ** 2).mean()
    den = {"std": lambda: math.sqrt(var) + hp["eps"],
           "var": lambda: math.sqrt(var + hp["eps"])}[hp["eps_mode"]]()
    x = (s - mu) / den
    if {"none": False, "inv_sqrt_n": True}[hp["len_scale"]]:
        x = x / math.sqrt(n)
    g = {"learn": lambda: c["p"][0], "off": lambda: 1.0}[hp["gain"]]()
    b = {"learn": lambda: c["p"][1], "off": lambda: 0.0}[hp["bias"]]()
    return g * x + b


def rm_relu_ln(s, c):  # A29
    hp = c["hp"]
    g, b = (c["p"][0], c["p"][1]) if hp["affine"] == "learn" else (1.0, 0.0)
    return g * standardise(relu(s), hp["eps"]) + b


def rm_linear_scale(s, c):  # A28
    N = row_len(c) if c["hp"]["length"] == "row" else c["Ttrain"]
    return s / N


def rm_shaped(s, c):  # A27 (Noci et al. 2023)
    hp, n = c["hp"], row_len(c)
    tau = hp["tau"] * (math.sqrt(c["C"]) if hp["tau_scale"] == "width" else 1.0)
    a = softmax(s / tau) - 1.0 / n
    a[n - 1] += 1.0
    return a


def rm_keynorm(s, c):  # A25: softmax(s - coef |k_j|^2 / (2 sqrt d))
    return softmax(s - c["hp"]["coef"] * c["ksq"] / (2.0 * math.sqrt(c["hs"])))


def rm_credal(s, c):  # A20: Dirichlet mean of concentrations e(s) + 1
    ev = c["hp"]["evidence"]
    if ev == "exp":  # in log space: (e^s + 1) / sum(e^s + 1), exact for large |s|
        M = max(0.0, s.max())
        num = np.exp(s - M) + math.exp(-M)
        return num / num.sum()
    e = softplus(s) if ev == "softplus" else relu(s)
    return (e + 1.0) / (e + 1.0).sum()


def rm_ssmax(s, c):  # A1: softmax((theta ln n + b) s)
    p, n = c["p"], row_len(c)
    b = p[1] if c["hp"]["bias"] == "learn" else 0.0
    return softmax((p[0] * math.log(n) + b) * s)


def rm_logn(s, c):  # A11: softmax(g (ln n / ln T_train)^kappa s), beta(1) = 0
    hp, n = c["hp"], row_len(c)
    g = c["p"][0] if hp["learn"] == "on" else 1.0
    beta = 0.0 if n == 1 else g * (math.log(n) / ln_ttrain(c)) ** hp["kappa"]
    return softmax(beta * s)


def rm_softmax1(s, c):  # A2: e^s / (e^b + sum e^s)
    b = c["p"][0] if c["hp"]["sink"] == "learn" else 0.0
    m = max(s.max(), b)
    e = np.exp(s - m)
    return e / (math.exp(b - m) + e.sum())


def rm_sigmoid(s, c):  # A3
    hp, n = c["hp"], row_len(c)
    mode = hp["bias_mode"]
    if mode == "learn":
        b = c["p"][0]
    else:
        b = {"ln_n": -math.log(n), "ln_T": -ln_ttrain(c), "fixed": hp["bias"], "none": 0.0}[mode]
    return sigmoid(s + b)


def rm_softpick(s, c):  # A4: ReLU(e^s - 1) / (sum |e^s - 1| + eps), in a shifted exact form
    m = max(s.max(), 0.0)
    u = np.exp(s - m) - math.exp(-m)  # (e^s - 1) e^-m
    return relu(u) / (np.abs(u).sum() + c["hp"]["eps"] * math.exp(-m))


def rm_clipped(s, c):  # A5: clip((zeta - gamma) p + gamma, 0, 1), gamma = -alpha / T_train
    hp = c["hp"]
    gamma = -hp["alpha"] / c["Ttrain"]
    return np.clip((hp["zeta"] - gamma) * softmax(s) + gamma, 0.0, 1.0)


def rm_relu(s, c):  # A7
    form, n = c["hp"]["form"], row_len(c)
    return {"relu_n": relu(s) / n, "relu": relu(s), "relu2": relu(s) ** 2 / n}[form]


def rm_polynomial(s, c):  # A8: clamp(s, -c, c)^p / sqrt(N)
    hp = c["hp"]
    pw = float(np.round(hp["power"]))
    N = row_len(c) if hp["scale"] == "row" else c["Ttrain"]
    return np.clip(s, -hp["clamp"], hp["clamp"]) ** pw / math.sqrt(N)


def rm_sa_softmax(s, c):  # A9
    p = softmax(s)
    if c["hp"]["form"] == "scaled":
        return s * p
    lo, hi = min(s.min(), 0.0), max(s.max(), 0.0)
    if hi - lo < 1e-30:
        return np.zeros_like(s)
    return (s - lo) / (hi - lo) * p


def window_bounds(hp):
    a, b = hp["window_min"], hp["window_max"]
    return (a, b) if a <= b else (b, a)


def rm_window(s, c):  # B5: softmax over t - w < j <= t
    hp, n = c["hp"], row_len(c)
    if c["kind"] == "wstoch":  # a training step in stochastic mode: w drawn in [min, max]
        w = c["wobs"]
        lo, hi = window_bounds(hp)
        ok = (w < n and lo <= w <= hi) or (w == n and hi >= n)
        if not ok:
            return np.full(n, np.nan)
    else:
        w = hp["window"]
    j = np.arange(n)
    inside = j > (n - 1) - w
    a = np.zeros(n)
    a[inside] = softmax(s[inside])
    return a


# Row statistics (AttnVariant.row_stat), as (value, lo, hi) for the row (s, a = reference).
def st_support(s, a, c):
    """entmax/sparsemax: fraction of keys in the support, |{j : a_j > 0}| / n. Keys within
    1e-5 of the threshold tau may fall either side in float."""
    y, n = c["margin"], row_len(c)
    return (y > 0).sum() / n, (y > 1e-5).sum() / n, (y > -1e-5).sum() / n


def st_topk(s, a, c):
    """topk: the support is the k kept keys (all n when n <= k)."""
    u = min(int(round(c["hp"]["k"])), row_len(c)) / row_len(c)
    return u, u, u


def st_credal(s, a, c):
    """credal: uncertainty u = n / S, S = sum_j (e(s_j) + 1) (VARIANTS.md A20)."""
    n, ev = row_len(c), c["hp"]["evidence"]
    e = np.exp(s) if ev == "exp" else softplus(s) if ev == "softplus" else relu(s)
    u = n / (e + 1.0).sum()
    return u, u, u


# ---- peer-framework row maps (issue 17), from the papers / ReaLLM-Forge formulas


def rm_topk(s, c):  # Gupta et al. 2021: softmax over the k largest, ties by lower index
    k = int(round(c["hp"]["k"]))
    n = len(s)
    if n <= k:
        return softmax(s)
    order = sorted(range(n), key=lambda j: (-s[j], j))[:k]
    a = np.zeros(n)
    sel = np.array(sorted(order))
    a[sel] = softmax(s[sel])
    return a


def rm_softcap(s, c):  # Gemma 2: softmax(cap tanh(s / cap))
    cap = c["hp"]["cap"]
    return softmax(cap * np.tanh(s / cap))


def rm_consmax(s, c):  # Liu et al. 2024: exp(s - beta) / gamma, exponent clamped (documented)
    beta, gamma = c["p"][0], math.exp(c["p"][1])  # gamma stored as its logarithm (documented)
    return np.exp(np.minimum(s - beta, c["hp"]["clamp"])) / gamma


def rm_polymax(s, c):  # ReaLLM-Forge Polymax: flat / linear / x^p + y0, divided by D
    hp = c["hp"]
    x0, y0, p, D = hp["x0"], hp["y0"], hp["power"], hp["divisor"]
    f = np.where(s > 0, np.abs(s) ** p + y0, np.where(s >= x0, y0 + y0 / (0.0 - x0) * s, 0.0))
    return f / D


def rm_squareplus(s, c):
    """Squareplus f(x) = (x + sqrt(x^2 + b)) / 2 (Barron 2021). form = reallm: as ReaLLM-Forge
    (ReaLLMASIC/ReaLLM-Forge, variations/softmax_variations.py, class Squareplus: 0.5 (x +
    sqrt(x^2 + b)) / squareplus_divisor, nothing summed over the row); form = barron: f over its
    row sum."""
    hp = c["hp"]
    f = 0.5 * (s + np.sqrt(s * s + hp["b"]))
    if hp["form"] == "reallm":
        return f / hp["divisor"]
    if hp["form"] == "barron":
        return f / f.sum()
    raise ValueError(f"squareplus: unknown form {hp['form']}")


def rm_sigsoftmax(s, c):  # Kanai et al. 2018: e^s sigma(s) / sum, in log space
    return softmax(s - softplus(-s))


def rm_softermax(s, c):  # Stevens et al. 2021: 2^s / sum 2^s (the integer max cancels)
    return softmax(s * math.log(2.0))


def rm_stablemax(s, c):  # Prieto et al. 2025: x + 1 (x >= 0), 1 / (1 - x) (x < 0), normalised
    f = np.where(s >= 0, s + 1.0, 1.0 / (1.0 - np.minimum(s, 0.0)))
    return f / f.sum()


def rm_gumbel(s, c):  # at evaluation (step < 0) no noise: softmax(s / tau), or one-hot argmax
    if c["hp"]["hard"] == "on":
        a = np.zeros(len(s))
        a[int(np.argmax(s))] = 1.0
        return a
    return softmax(s / c["hp"]["tau"])


STATS = {"entmax": st_support, "sparsemax": st_support, "credal": st_credal, "topk": st_topk}

ROWMAPS = {
    "softmax": rm_softmax, "cog": rm_cog, "entmax": rm_entmax, "sparsemax": rm_sparsemax,
    "quantized": rm_quantized, "pot": rm_pot, "hccs": rm_hccs, "multimax": rm_multimax,
    "softplus": rm_softplus, "swat": rm_swat, "slowgrow": rm_slowgrow,
    "normalized": rm_normalized, "relu_ln": rm_relu_ln, "linear_scale": rm_linear_scale,
    "shaped": rm_shaped, "keynorm": rm_keynorm, "credal": rm_credal, "ssmax": rm_ssmax,
    "logn": rm_logn, "softmax1": rm_softmax1, "sigmoid": rm_sigmoid, "softpick": rm_softpick,
    "clipped": rm_clipped, "relu": rm_relu, "polynomial": rm_polynomial,
    "sa_softmax": rm_sa_softmax, "window": rm_window,
    "topk": rm_topk, "softcap": rm_softcap, "consmax": rm_consmax, "polymax": rm_polymax,
    "squareplus": rm_squareplus, "sigsoftmax": rm_sigsoftmax, "softermax": rm_softermax,
    "stablemax": rm_stablemax, "gumbel": rm_gumbel,
}

# ---------------------------------------------------------------------------------------------
# Documented hyperparameters: default and choice words (VARIANTS.md and the papers where they
# fix a value: clipped alpha = 12 (OPT-125m script), softpick eps = 1e-8, ssmax theta0 = 0.43,
# quantized K = 16, entmax alpha = 1.5; the user documentation for the rest).
HPARAMS = {
    "softmax": {}, "cog": {}, "sparsemax": {},
    "entmax": {"alpha": 1.5, "learn_alpha": "off|on:off"},
    "quantized": {"levels": 16, "grid": "levels|intervals:levels",
                  "rounding": "nearest|stochastic:nearest", "ste": "post|pre:post",
                  "renorm": "off|on:off"},
    "pot": {"frac_bits": 0, "round": "nearest|floor:nearest"},
    "hccs": {"alpha_init": 1, "beta_init": 1, "learn": "off|on:on"},
    "multimax": {"t_init": 0, "r_init": 0},
    "softplus": {"n_ref": 0, "length_scale": "log|none:log", "reweight": "off|power:off",
                 "power": 2},
    "swat": {"window": 128, "slopes": "balanced|alibi|none:balanced",
             "bias": "none|fixed|learn:none"},
    "slowgrow": {"kernel": "poly|log|elu1:poly", "degree": 2},
    # OliverRichter/normalized-attention: per-head gain (init 1) and bias (init 0), 1e-3 on the std
    "normalized": {"eps": 1e-3, "gain": "off|learn:learn", "len_scale": "none|inv_sqrt_n:none",
                   "bias": "off|learn:learn", "eps_mode": "std|var:std"},
    "relu_ln": {"eps": 1e-12, "affine": "learn|none:learn"},
    "linear_scale": {"length": "row|train:row"},
    "shaped": {"tau": 1, "tau_scale": "width|none:width"},
    "keynorm": {"coef": 1},
    "credal": {"evidence": "softplus|exp|relu:softplus"},
    "ssmax": {"theta_init": "fixed|inv_log_T:fixed", "theta0": 0.43, "bias": "off|learn:off"},
    "logn": {"kappa": 1, "learn": "off|on:off"},
    "softmax1": {"sink": "fixed|learn:fixed"},
    # apple/ml-sigmoid-attention: the LM config's fixed sigmoid_bias = -ln 2048 = -ln T_train
    "sigmoid": {"bias_mode": "ln_n|ln_T|fixed|none|learn:ln_T", "bias": 0},
    "softpick": {"eps": 1e-8},
    "clipped": {"alpha": 12, "zeta": 1},
    "relu": {"form": "relu_n|relu|relu2:relu_n"},
    "polynomial": {"power": 3, "clamp": 10, "scale": "row|train:row"},
    "sa_softmax": {"form": "scaled|minmax:scaled"},
    "window": {"window": 64, "window_mode": "fixed|stochastic:fixed", "window_min": 16,
               "window_max": 128},
    "topk": {"k": 32}, "softcap": {"cap": 50}, "consmax": {"beta0": 2.5, "gamma0": 100, "clamp": 80},
    "polymax": {"x0": -100, "y0": 1, "power": 2, "divisor": 1000}, "squareplus": {"form": "reallm|barron:reallm", "b": 4.0 * math.log(2.0) ** 2,
                   "divisor": 256},
    "sigsoftmax": {}, "softermax": {}, "stablemax": {}, "gumbel": {"tau": 1, "hard": "off|on:off"},
}


def f32(x):
    return float(np.float32(x))


def logit(x):
    return math.log(x / (1.0 - x))


def init_params(v, c, P):
    """Documented initial per-head parameters; NaN where this configuration leaves one unused."""
    hp, nan = c["hp"], float("nan")
    if v == "entmax":
        a = min(max(hp["alpha"], 1.01), 1.99)
        return [logit(a - 1.0) if hp["learn_alpha"] == "on" else nan]
    if v == "hccs":
        on = hp["learn"] == "on"
        return [hp["alpha_init"] if on else nan, math.log(hp["beta_init"]) if on else nan]
    if v == "multimax":
        return [hp["t_init"]] * 4 + [hp["r_init"]] * 4
    if v == "ssmax":
        th = hp["theta0"] if hp["theta_init"] == "fixed" else 1.0 / ln_ttrain(c)
        return [th, 0.0 if hp["bias"] == "learn" else nan]
    if v == "logn":
        return [1.0 if hp["learn"] == "on" else nan]
    if v == "softmax1":
        return [0.0 if hp["sink"] == "learn" else nan]
    if v == "sigmoid":
        return [-ln_ttrain(c) if hp["bias_mode"] == "learn" else nan]
    if v == "swat":
        w = hp["window"]
        return [-math.log(min(w, max(c["Ttrain"], 2))) if hp["bias"] == "learn" else nan]
    if v == "normalized":
        return [1.0 if hp["gain"] == "learn" else nan, 0.0 if hp["bias"] == "learn" else nan]
    if v == "consmax":
        return [hp["beta0"], math.log(hp["gamma0"])]
    if v == "relu_ln":
        on = hp["affine"] == "learn"
        return [1.0 if on else nan, 0.0 if on else nan]
    return [nan] * P


# ---------------------------------------------------------------------------------------------
INT_KEYS = {"n", "T", "Ttrain", "NH", "hs", "C", "h", "step", "off", "id", "wobs", "P"}


def parse(path):
    recs = []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            tok = line.split()
            if not tok:
                continue
            if tok[0] not in ("spec", "init", "case"):
                raise ValueError(f"{path}:{lineno}: unknown record '{tok[0]}'")
            r = {"type": tok[0], "hp": {}, "p": [], "line": lineno}
            for t in tok[1:]:
                if "=" not in t:
                    raise ValueError(f"{path}:{lineno}: token '{t}' is not key=value")
                k, val = t.split("=", 1)
                if k.startswith("hp."):
                    try:
                        r["hp"][k[3:]] = float(val)
                    except ValueError:
                        r["hp"][k[3:]] = val
                elif k == "p":
                    r["p"] = [float(x) for x in val.split(",") if x]
                elif k in INT_KEYS:
                    r[k] = int(val)
                else:
                    r[k] = val
            recs.append(r)
    return recs


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: ref_rowmaps.py DIR\n")
        return 2
    d = sys.argv[1]
    try:
        recs = parse(os.path.join(d, "manifest.txt"))
    except (OSError, ValueError) as e:
        sys.stderr.write(f"ref_rowmaps.py: {e}\n")
        return 2
    s_all = np.fromfile(os.path.join(d, "s.f32"), dtype="<f4").astype(np.float64)
    k_all = np.fromfile(os.path.join(d, "ksq.f32"), dtype="<f4").astype(np.float64)
    status, refs, inits, seen_noref = [], [], [], set()
    for r in recs:
        v = r["variant"]
        if r["type"] == "spec":
            known = HPARAMS.get(v)
            if known is None:
                continue  # reported as noref by its cases
            name = r["name"]
            if name not in known:
                status.append(f"nohp {v} {name}")
                continue
            doc = known[name]
            if isinstance(doc, str):
                words, dflt = doc.split(":")
                if r["choices"] != words:
                    status.append(f"choices {v} {name} expected {words} got {r['choices']}")
                elif r["def"] != dflt:
                    status.append(f"default {v} {name} expected {dflt} got {r['def']}")
            elif f32(float(r["def"])) != f32(doc):
                status.append(f"default {v} {name} expected {doc:.9g} got {r['def']}")
            continue
        if r["type"] == "init":
            vals = init_params(v, r, r["P"]) if v in ROWMAPS else [float("nan")] * r["P"]
            if len(vals) != r["P"]:
                status.append(f"nparams {v} expected {len(vals)} got {r['P']}")
                vals = (vals + [float("nan")] * r["P"])[: r["P"]]
            inits.extend(vals)
            continue
        n, off = r["n"], r["off"]
        r["ksq"] = k_all[off:off + n]
        fn = ROWMAPS.get(v)
        if fn is None:
            if v not in seen_noref:
                status.append(f"noref {v}")
                seen_noref.add(v)
            out = (np.full(n, np.nan),) * 3
        else:
            try:
                out = fn(s_all[off:off + n].copy(), r)
            except KeyError as e:
                status.append(f"nohp {v} {e.args[0]}")
                out = (np.full(n, np.nan),) * 3
            if not isinstance(out, tuple):
                out = (out, out, out)
        for a in out:
            a = np.asarray(a, dtype=np.float64)
            if a.shape != (n,):
                status.append(f"shape {v} line {r['line']}")
                a = np.full(n, np.nan)
            refs.append(a)
        st = STATS.get(v)
        if st is not None and r.get("stat") == "1" and fn is not None:
            refs.append(np.asarray(st(s_all[off:off + n].copy(), out[0], r), dtype=np.float64))
        else:
            if r.get("stat") == "1":
                status.append(f"nostat {v}")
            refs.append(np.full(3, np.nan))
    np.concatenate(refs or [np.zeros(0)]).astype("<f8").tofile(os.path.join(d, "ref.f64"))
    np.asarray(inits, dtype="<f8").tofile(os.path.join(d, "init.f64"))
    with open(os.path.join(d, "status.txt"), "w") as f:
        for line in status:
            f.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
