#!/usr/bin/python3
"""scripts/ablate_claims.py: the verdicts of a sweep's `ablate.claim` lines (scripts/ablate_report.py).

Claim syntax: `METRIC: GROUP_A < GROUP_B | text | claimed: EFFECT | size: NUMBER | settings:
SETTINGS` (also `>`, and `~ TOL` for parity within TOL); the fields after the text are optional,
in any order, each after a ' | ' (a '|' touching a word is text). METRIC is a column of the
sweep's results, or, in a sweep over `lr`, one of the learning-rate metrics of
scripts/ablate_lr.py (LR_METRICS: `lr_sensitivity`, `lr_max_stable_log10`), whose groups are the
variants without their learning rate. Verdict rules (docs/ablations.md, "Claims"):
  - with >= 3 seeds paired: the 95% t interval of the per-seed differences A - B decides
    (paired_verdict); with fewer, the difference of the means against the larger seed range;
  - a claim on sinks, outliers or learning-rate instability is "untestable here" when a seed of
    the group that should show the phenomenon misses its positive control;
  - "reproduced: sign and size" needs the 95% interval of measured/claimed, not its point, inside
    [1/2, 2]; otherwise "sign only";
  - every tested claim gets the exact paired sign-flip p (ablate_stats.py), and the claims of one
    sweep are corrected together with Holm's method (correct_family): the verdict is the
    unadjusted one when its Holm-adjusted p <= 0.05, else "inconclusive after correction"; the
    unadjusted verdict stays beside it (verdict_unadjusted).
Each verdict names its paper from ATTRIBUTION (one table for every sweep: the sweep files'
texts, committed before their runs, are not edited).
"""
import math
import re
import sys

import ablate_stats as st

LR_METRICS = ("lr_sensitivity", "lr_max_stable_log10")

# Which paper a claim tests, by the variant of group A (its label, or the label's first part) and
# the family of the metric (metric_family); "*" matches any. The longest matching variant wins.
# softmax1's first-token (sink) claims are Kaul et al.'s (they report first-token attention
# 65% -> 3.3% with softmax-1); its outlier claims are OutEffHop's (Hu et al.: about -22% kurtosis).
ATTRIBUTION = [
    ("softmax1", "sink", "Kaul et al. 2410.17174 (softmax-1; the function is Miller's 2023 "
                         "\"attention is off by one\")"),
    ("softmax1", "outlier", "Hu et al. 2404.03828 (OutEffHop)"),
    ("softpick", "*", "Zuhri et al. 2504.20966 (softpick)"),
    ("sigmoid+attn.bias_mode=none", "sink", "Gu et al. 2410.10781, sec. 7"),
    ("sigmoid+attn.bias_mode=ln_n", "loss", "Ramapuram et al. 2409.04431"),
    ("relu", "sink", "Guo et al. 2410.13835"),
    ("clipped", "*", "Bondarenko et al. 2306.12929"),
    ("gated", "*", "Bondarenko et al. 2306.12929"),
    ("ssmax", "*", "Nakanishi 2501.19399 (SSMax)"),
    ("softplus", "*", "Gao & Spratling 2501.13428 (LSSA)"),
    ("boosted", "loss", "Sargolzaei 2604.03190"),
    ("twicing", "loss", "Sargolzaei 2604.03190 (its twicing baseline)"),
    ("*", "lr", "Wortsman et al. 2309.14322 (LR sensitivity)"),
]
# Names a claim's text may credit, and the arXiv number each stands for: a text that credits a
# paper other than the table's gets a note beside the table's attribution.
CREDITS = {"OutEffHop": "2404.03828", "Hu et al": "2404.03828", "Kaul": "2410.17174",
           "Gu et al": "2410.10781", "Guo et al": "2410.13835", "Zuhri": "2504.20966",
           "Ramapuram": "2409.04431", "Bondarenko": "2306.12929", "Nakanishi": "2501.19399",
           "Gao & Spratling": "2501.13428", "Sargolzaei": "2604.03190",
           "Wortsman": "2309.14322"}


def fnum(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def finite(v):
    return v is not None and math.isfinite(v)


def group_stats(rows, col):
    vals = [r.get(col) for r in rows]
    vals = [float(v) for v in vals if isinstance(v, (int, float)) and finite(float(v))]
    if not vals:
        return None
    n = len(vals)
    mean = sum(vals) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1)) if n > 1 else None
    return {"n": n, "mean": mean, "sd": sd, "min": min(vals), "max": max(vals), "vals": vals}


def resolve_group(name, groups):
    """A claim names a group by its label, or by the label's first part when that is unique
    (`ssmax` for `ssmax+attn.theta_init=inv_log_T`)."""
    if name in groups:
        return name
    cand = [g for g in groups if g.split("+")[0] == name]
    return cand[0] if len(cand) == 1 else name


def loss_unit(settings):
    """`ablate.loss_unit = FACTOR UNIT` (e.g. `3.839 nats/GPT-2 token`): losses are also printed
    multiplied by FACTOR, in UNIT. None when unset."""
    v = (settings or {}).get("loss_unit", "").strip()
    if not v:
        return None
    parts = v.split(None, 1)
    f = fnum(parts[0])
    if f is None or not finite(f) or f <= 0 or len(parts) < 2:
        sys.exit("ablate.loss_unit = '%s': expected 'FACTOR UNIT', e.g. '3.839 nats/GPT-2 token'" % v)
    return f, parts[1].strip()


def metric_family(metric):
    if metric.startswith(("sink", "nontrig_a0", "stream_")):
        return "sink"  # stream_*: what evicting the first tokens costs (ablate.stream)
    if metric.startswith(("kurtosis", "max_abs", "massive")):
        return "outlier"
    if metric.startswith("lr_"):
        return "lr"
    if "loss" in metric:
        return "loss"
    return "task"


def attribution(group, metric, text):
    """(the paper a claim tests, a note when the claim's text credits another one)."""
    fam = metric_family(metric)
    best = None
    for var, f, cite in ATTRIBUTION:
        if f not in ("*", fam):
            continue
        if var == "*" or group == var or group.startswith(var + "+") or group.split("+")[0] == var:
            score = (var != "*", len(var))
            if best is None or score > best[0]:
                best = (score, cite)
    cite = best[1] if best else ""
    other = sorted({name for name, num in CREDITS.items() if name in (text or "") and num not in cite})
    note = ""
    if cite and other:
        note = "the sweep file's text credits %s (docs/ablations.md, \"Attributions\")" % \
            ", ".join(other)
    return cite, note


def claim_syntax(line):
    """(error, None) for a claim line that cannot be read, else (None, (TEST, text, fields,
    match of TEST, (size, relative) or None)). scripts/ablate calls this through --check-claim
    when it reads the sweep file, so a bad line stops the sweep before any training."""
    sp = split_claim(line)
    if sp is None:
        return "a field (claimed:, size: or settings:) is given twice", None
    test, desc, fields = sp
    m = re.match(r"^\s*([A-Za-z0-9_]+)\s*:\s*(\S+)\s*(<|>|~)\s*(\S+)(?:\s+(\S+))?\s*$", test)
    if not m:
        return ("'%s' is not 'METRIC: A < B', 'METRIC: A > B' or 'METRIC: A ~ B TOL'"
                % test.strip()), None
    if m.group(1).startswith("lr_") and m.group(1) not in LR_METRICS:
        return ("'%s' is not a learning-rate metric (%s)" % (m.group(1), ", ".join(LR_METRICS))), \
            None
    if m.group(3) == "~" and (m.group(5) is None or fnum(m.group(5)) is None
                              or fnum(m.group(5)) <= 0):
        return "a parity claim needs a positive tolerance: 'METRIC: A ~ B TOL'", None
    if m.group(3) != "~" and m.group(5) is not None:
        return "'%s': a tolerance goes with '~' only" % test.strip(), None
    size = fields.get("size", "")
    if size:
        ms = re.match(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)\s*(%?)$", size.replace("\u2212", "-"))
        if not ms or fnum(ms.group(1)) is None or fnum(ms.group(1)) == 0:
            return "size: '%s' is not a non-zero number or N%%" % size, None
        size = (fnum(ms.group(1)), ms.group(2) == "%")
    return None, (test, desc, fields, m, size or None)


def split_claim(line):
    """'TEST | text | claimed: .. | size: .. | settings: ..' -> (TEST, text, {field: value}).
    A separator is a '|' with white space on both sides, so a '|' that touches a word, as in
    'max |activation|', stays inside its part. The fields are recognised by their name; any
    other part belongs to the text. A field given twice is an error (None), not a silent pick."""
    parts = re.split(r"\s\|\s", line)
    text, fields, desc = parts[0], {}, []
    for part in parts[1:]:
        mf = re.match(r"^\s*(claimed|size|settings)\s*:\s*(.*?)\s*$", part)
        if mf and mf.group(1) in fields:
            return None
        if mf:
            fields[mf.group(1)] = mf.group(2)
        else:
            desc.append(part.strip())
    return text, " | ".join(d for d in desc if d), fields


def evaluate_claim(text, groups, unit=None, lr_groups=None):
    """'METRIC: A < B | description | claimed: EFFECT' -> dict with the numbers and the
    unadjusted verdict (correct_family adds the corrected one). lr_groups: the per-variant,
    per-seed learning-rate records of a sweep over lr (scripts/ablate_lr.py), or None."""
    err, parsed = claim_syntax(text)
    if err:
        print("ablate_report: claim '%s': %s" % (text.strip(), err), file=sys.stderr)
        test, _, rest = text.partition(" | ")
        return {"claim": test.strip(), "text": rest.strip(), "claimed": "", "settings": "",
                "verdict": "invalid claim line", "sentence": err}
    test, desc, fields, m, size = parsed
    res = {"claim": test.strip(), "text": desc, "claimed": fields.get("claimed", ""),
           "settings": fields.get("settings", "")}
    if size is not None:
        res["size"], res["size_relative"] = size
    metric, a, op, b, tol = m.groups()
    if metric in LR_METRICS:
        if lr_groups is None:
            res.update(verdict="invalid claim line", sentence="%s needs a sweep over the learning "
                       "rate (a sweep.lr line)" % metric)
            return res
        groups = lr_groups
    a, b = resolve_group(a, groups), resolve_group(b, groups)
    res["paper"], res["paper_note"] = attribution(a, metric, desc)
    sa = group_stats(groups.get(a, []), metric)
    if fnum(b) is not None and b not in groups:
        sb = {"n": 0, "mean": float(b), "sd": None, "min": float(b), "max": float(b), "vals": []}
    else:
        sb = group_stats(groups.get(b, []), metric)
    res.update(metric=metric, a=a, b=b, op=op, stats_a=sa, stats_b=sb)
    runs = groups.get(a, []) + (groups.get(b, []) if b in groups else [])
    if sa is None or sb is None:
        res.update(verdict="inconclusive", sentence="no values for %s" % (a if sa is None else b))
        incomplete(res, runs)
        return res
    diff = sa["mean"] - sb["mean"]
    spread = max(sa["max"] - sa["min"], sb["max"] - sb["min"])
    single = sa["n"] < 2 or (sb["n"] == 1)

    def desc_group(name, s):
        if s["n"] == 0:
            return "%s" % name
        if s["n"] == 1:
            return "%s %.4g (1 seed)" % (name, s["mean"])
        return "%s %.4g ± %.2g (sd, %d seeds; range %.4g–%.4g)" % (name, s["mean"], s["sd"],
                                                                   s["n"], s["min"], s["max"])
    nums = "%s: %s vs %s; difference %.4g, largest seed range %.2g" % (
        metric, desc_group(a, sa), desc_group(b, sb), diff, spread)
    if op == "~":
        t = fnum(tol) if tol else 0.0
        if abs(diff) <= t and not single and abs(diff) + spread <= t:
            verdict = "reproduced"
        elif abs(diff) > t + spread and not single:
            verdict = "not reproduced"
        else:
            verdict = "inconclusive (spread larger than effect)" if not single else \
                "inconclusive (one seed)"
        nums += "; tolerance %g" % t
    else:
        want = diff < 0 if op == "<" else diff > 0
        if single:
            verdict = "inconclusive (one seed)"
        elif abs(diff) > spread:
            verdict = "reproduced" if want else "not reproduced"
        else:
            verdict = "inconclusive (spread larger than effect)"
    res.update(verdict=verdict, diff=diff, spread=spread, sentence=nums)
    b_num = fnum(b) if (fnum(b) is not None and b not in groups) else None
    paired_verdict(res, metric, op, fnum(tol) if tol else 0.0, groups.get(a, []),
                   groups.get(b, []), b_num)
    res["measured"] = measured_text(res, metric, unit)
    size_reading(res, metric, unit, sb)
    incomplete(res, runs)
    return res


def size_reading(res, metric, unit, sb):
    """measured/claimed for a claim with `size:`, its 95% interval (from the paired interval),
    and the split of a directional "reproduced" into "sign and size" (the interval of the ratio
    inside [1/2, 2]) and "sign only" (otherwise, or without a size or an interval)."""
    if res.get("op") == "~" or "verdict" not in res:
        return
    measured = res.get("paired_mean", res.get("diff"))
    scale = None  # measured effect -> the unit of `size:`
    if measured is not None and "size" in res:
        if res["size_relative"]:
            base = sb["mean"] if sb else None
            if base:
                scale = 100.0 / abs(base)
                res["measured"] += "; %+.3g%% of %s" % (measured * scale, res["b"])
        else:
            scale = unit[0] if unit and "loss" in metric else 1.0
    if scale is not None:
        res["ratio"] = measured * scale / res["size"]
        res["measured"] += ", measured/claimed = %.3g" % res["ratio"] if res["size_relative"] \
            else "; measured/claimed = %.3g" % res["ratio"]
        if "paired_lo" in res:
            lo, hi = st.ratio_interval(res["paired_lo"] * scale, res["paired_hi"] * scale,
                                       res["size"])
            res["ratio_lo"], res["ratio_hi"] = lo, hi
            res["measured"] += " [%.3g, %.3g]" % (lo, hi)
    if res["verdict"] == "reproduced":
        inside = "ratio_lo" in res and 0.5 <= res["ratio_lo"] and res["ratio_hi"] <= 2.0
        res["verdict"] = "reproduced: sign and size" if inside else "reproduced: sign only"


def measured_text(res, metric, unit):
    """The measured effect A - B: the paired mean, 95% interval and exact sign-flip p when there
    is one, else the difference of the group means; for a loss also in ablate.loss_unit."""
    if "paired_mean" in res:
        vals = [res["paired_mean"], res["paired_lo"], res["paired_hi"]]
        form = "%+.4g (paired, 95%% interval [%.4g, %.4g])"
    elif "diff" in res:
        vals = [res["diff"]]
        form = "%+.4g (difference of the means)"
    else:
        return ""
    out = form % tuple(vals)
    if unit and "loss" in metric:
        f, name = unit
        scaled = [v * f for v in vals]
        if len(scaled) == 3:
            out += " = %+.4g [%.4g, %.4g] %s" % (scaled[0], scaled[1], scaled[2], name)
        else:
            out += " = %+.4g %s" % (scaled[0], name)
        res["measured_scaled"] = scaled
    if res.get("p_exact") is not None:
        out += "; exact sign-flip p = %.3g" % res["p_exact"]
    return out


def control_column(metric):
    """(the positive-control column a claim on `metric` needs, whether a larger value means less
    of the phenomenon), or (None, False)."""
    if metric.startswith("stream_"):
        return "control_stream", False
    if metric.startswith(("sink_rate_gu", "nontrig_a0")):
        return "control_sink_gu", False
    if metric.startswith("sink"):
        return "control_sink", False
    if metric.startswith(("kurtosis", "max_abs", "massive")):
        return "control_outlier", False
    if metric == "lr_sensitivity":
        return "control_lr", False
    if metric == "lr_max_stable_log10":
        return "control_lr", True  # a larger stable learning rate is less instability
    return None, False


# the status of a run that scripts/ablate_report.py lists but that has not finished: a sweep
# trained in parts, its other parts still to come
PENDING = ("not run", "incomplete")


def incomplete(res, rows):
    """A claim some of whose runs have not finished reads "incomplete (k of n runs done)" and
    takes no part in the correction (no exact p), unless it is already untestable (a finished
    run missed the control). The numbers of the runs done stay in the sentence."""
    pending = sum(1 for r in rows if r.get("status") in PENDING)
    if not pending or res.get("untestable"):
        return
    res["verdict"] = "incomplete (%d of %d runs done)" % (len(rows) - pending, len(rows))
    res.pop("p_exact", None)
    res["sentence"] = res.get("sentence", "") + \
        "; read when the sweep's other parts are in (%d runs to train)" % pending


def paired_verdict(res, metric, op, tol, rows_a, rows_b, b_num=None):
    """The per-seed differences A - B (against the number b_num when B is one), their exact
    sign-flip p (p_exact), and with >= 3 seeds paired their mean and 95% t interval and the
    verdict from the interval (it replaces the range verdict): for < and > reproduced when the
    interval excludes 0 on the claimed side, not reproduced when it excludes 0 on the other; for
    ~ TOL reproduced when the interval lies inside [-TOL, TOL], not reproduced when it lies
    outside or every seed is outside. A claim with a positive control (control_column) is
    "untestable here" when a seed of the group expected to show the phenomenon (B for <, A for >,
    both for ~; the other way round for a metric where larger is less of it) misses it."""
    by_seed = lambda rows: {str(r.get("seed")): r for r in rows}
    sa, sb = by_seed(rows_a), by_seed(rows_b)
    pairs = []
    if b_num is not None:
        for s in sorted(sa, key=lambda x: (len(x), x)):
            va = fnum(sa[s].get(metric))
            if finite(va):
                pairs.append((s, va - b_num))
    for s in sorted(set(sa) & set(sb), key=lambda x: (len(x), x)):
        va, vb = fnum(sa[s].get(metric)), fnum(sb[s].get(metric))
        if va is not None and vb is not None and finite(va) and finite(vb):
            pairs.append((s, va - vb))
    ctl, larger_is_less = control_column(metric)
    if ctl == "control_sink_gu" and any("control_sink_held" in r for r in rows_a + rows_b):
        ctl = "control_sink_held"  # ablate.sinks_hold: the control held over time
    if ctl:
        lo_side = op == "<" if not larger_is_less else op == ">"
        need = rows_b if lo_side else rows_a if op != "~" else rows_a + rows_b
        # a run not trained yet (a sweep trained in parts) has not missed its control: the
        # claim waits for it (evaluate_claim: "incomplete"); one finished run that misses it
        # makes the claim untestable whatever the others do
        need = [r for r in need if r.get("status") not in PENDING]
        if need and not all(r.get(ctl) == 1 for r in need):
            res.update(verdict="untestable here", sentence=res.get("sentence", "") +
                       "; the positive control (%s) is not met in every seed" % ctl)
            res["untestable"] = True
    d = [x for _, x in pairs]
    if d and not res.get("untestable"):
        if op == "~":
            res["p_exact"], res["p_way"] = st.parity_p(d, tol)
        else:
            res["p_exact"] = st.signflip_p(d, "two")
        res["p_n"] = len(d)
    if len(pairs) < 3 or b_num is not None:
        return
    n = len(d)
    mean = sum(d) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
    half = st.t975(n - 1) * sd / math.sqrt(n)
    lo, hi = mean - half, mean + half
    res.update(paired_n=n, paired_mean=mean, paired_lo=lo, paired_hi=hi,
               paired_seeds=[s for s, _ in pairs])
    res["sentence"] = res.get("sentence", "") + \
        "; paired by seed (n = %d): mean difference %.4g, 95%% interval [%.4g, %.4g]" % (
            n, mean, lo, hi)
    if res.get("untestable"):
        return
    if op == "~":
        outside = all(abs(x) > tol for x in d)
        v = "reproduced" if -tol <= lo and hi <= tol else \
            "not reproduced" if lo > tol or hi < -tol or outside else \
            "inconclusive (interval not decided)"
        if outside:
            res["sentence"] += "; outside the tolerance %g in every seed (%s)" % (
                tol, ", ".join("%.3g" % x for x in d))
    else:
        want_neg = op == "<"
        if (hi < 0 and want_neg) or (lo > 0 and not want_neg):
            v = "reproduced"
        elif (lo > 0 and want_neg) or (hi < 0 and not want_neg):
            v = "not reproduced"
        else:
            v = "inconclusive (interval includes 0)"
            against = sum(1 for x in d if (x > 0) == want_neg and x != 0)
            if against == n:
                v = "inconclusive (interval includes 0; the opposite sign in all %d seeds)" % n
    res["verdict"] = v


def correct_family(verdicts):
    """Holm's correction over the tested claims of one sweep (those with an exact p: not
    untestable, not invalid), at level ALPHA. Each verdict keeps its unadjusted reading in
    verdict_unadjusted; a decided verdict (reproduced or not reproduced) stands when its
    Holm-adjusted p is <= ALPHA (and, for a parity claim, the smallest p is that of the way the
    verdict went), else it reads "inconclusive after correction"."""
    ps = [v.get("p_exact") for v in verdicts]
    adj = st.holm(ps)
    m = sum(1 for p in ps if p is not None)
    for v, pa in zip(verdicts, adj):
        v["verdict_unadjusted"] = v["verdict"]
        if pa is None:
            continue
        v["p_holm"], v["holm_m"] = pa, m
        un = v["verdict"]
        decided = un.startswith(("reproduced", "not reproduced"))
        agrees = True
        if v.get("op") == "~" and decided:
            agrees = (v.get("p_way") == "inside") == un.startswith("reproduced")
        note = "; exact sign-flip p = %.3g over %d seed%s (the smallest possible: %.3g), " \
               "Holm-adjusted over the sweep's %d tested claim%s: %.3g" % (
                   v["p_exact"], v["p_n"], "" if v["p_n"] == 1 else "s",
                   st.min_exact_p(v["p_n"]),
                   m, "" if m == 1 else "s", pa)
        v["sentence"] = v.get("sentence", "") + note
        if decided and not (pa <= st.ALPHA and agrees):
            v["verdict"] = "inconclusive after correction"
    return verdicts
