#!/usr/bin/python3
"""scripts/ablate_report.py: results table, claims and plots of a sweep run by scripts/ablate.

    /usr/bin/python3 scripts/ablate_report.py OUT_DIR
    /usr/bin/python3 scripts/ablate_report.py --check-claim 'CLAIM LINE'   (exit 1: why not)

Reads OUT_DIR/ablate_sweep.tsv (written by scripts/ablate) and each run's metrics.jsonl (or
the metrics.jsonl.gz and provenance.json of a committed result, scripts/results_export),
ablate_status.json, probe.json, long_context.txt and passkey.txt. Writes OUT_DIR/results.csv,
OUT_DIR/results.md (one row per run, then mean and spread over seeds per group), OUT_DIR/claims.md
and claims.json (a verdict per `ablate.claim` line), and OUT_DIR/plots/*.png.

Claims: `ablate.claim = METRIC: GROUP_A < GROUP_B | text | claimed: EFFECT | size: NUMBER |
settings: SETTINGS` (also `>`, and `~ TOL` for parity within TOL). The fields after the text are
optional and may come in any order, each after a ' | ' (a '|' with white space on both sides;
a '|' touching a word, as in 'max |activation|', is text): `claimed:` is the paper's claimed
effect in words, printed beside the measured effect A - B; `size:` is that effect as a number, in the unit the measured
effect is printed in (for a loss with `ablate.loss_unit`, that unit), or as `N%` of group B's
mean, and the report prints measured/claimed beside it; `settings:` is `paper` when the sweep
runs the paper's own settings and metric, or `adapted: WHAT DIFFERS`. `ablate.loss_unit =
FACTOR UNIT` also prints loss effects times FACTOR, e.g. nats per byte times bytes per GPT-2
token. A group is a label of the non-seed swept values (e.g. `softmax1`, or
`quantized+attn.levels=8`; the part before '+' suffices when it is unique); GROUP_B may be a
number. Verdict, from the per-seed values:
reproduced when the difference of the group means has the claimed sign and exceeds the larger
range (max - min) over seeds of the two groups; not reproduced when it has the opposite sign
and exceeds it; inconclusive otherwise (the spread is larger than the effect), and also when a
group has a single seed (no spread is known) or a value is missing. With >= 3 paired seeds the
interval decides instead (paired_verdict). A reproduced directional claim with a `size:` reads
"reproduced: sign and size" when measured/claimed lies in [1/2, 2] and "reproduced: sign only"
otherwise (also without a size). A parity claim whose difference exceeds the tolerance in every
seed is not reproduced.
"""
import bisect
import csv
import gzip
import json
import math
import os
import re
import sys

import syspython  # scripts/syspython.py

SPIKE_FACTOR = 5.0   # a gradient-norm spike: > 5x the running median of the earlier steps
SPIKE_MIN_HISTORY = 10
# The positive controls (docs/ablations.md, "Calibrated sink control"): a run shows attention
# sinks when Gu's sink rate reaches CONTROL_GU_RATE (the trainer's sink_rate: control_sink;
# ./probe sinks' sink_rate_gu, or Guo's non-trigger weight >= CONTROL_GUO_A0: control_sink_gu),
# and activation outliers when kurtosis_max or the massive-activation ratio reaches
# CONTROL_OUTLIER. sink_heads_l1 (the share of heads of layers >= 1 whose raw sink fraction
# reaches CONTROL_SINK_FRAC) is reported beside them: it was the earlier, stricter sink rule.
CONTROL_SINK_FRAC = 0.3
CONTROL_GU_RATE, CONTROL_GUO_A0 = 0.15, 0.5
CONTROL_OUTLIER = 100.0
# two-sided 95% Student t quantiles by degrees of freedom (df > 30: 1.96 is within 2%)
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
        9: 2.262, 10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120,
        17: 2.110, 18: 2.101, 19: 2.093, 20: 2.086, 25: 2.060, 30: 2.042}


def t975(df):
    if df in T975:
        return T975[df]
    return next((T975[k] for k in sorted(T975) if k >= df), 1.96)


def fnum(x):
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v


def finite(v):
    return v is not None and math.isfinite(v)


def median(xs):
    xs = sorted(x for x in xs if finite(x))
    if not xs:
        return None
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def read_sweep(out):
    """ablate_sweep.tsv -> (swept keys, [(run folder, [(key, value)])], ablate.* settings,
    claims, the other rows; a run's settings string is meta["run_settings"][folder])."""
    keys, runs, settings, claims, meta = [], [], {}, [], {"run_settings": {}}
    with open(os.path.join(out, "ablate_sweep.tsv")) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if parts[0] == "key":
                keys.append(parts[1])
            elif parts[0] == "run":
                kv = []
                for p in parts[2:]:
                    k, _, v = p.partition("=")
                    kv.append((k, v))
                runs.append((parts[1], kv))
            elif parts[0] == "setting":
                settings[parts[1]] = parts[2] if len(parts) > 2 else ""
            elif parts[0] == "claim":
                claims.append(parts[1])
            elif parts[0] == "run_settings" and len(parts) > 2:
                meta["run_settings"][parts[1]] = parts[2]
            else:
                meta[parts[0]] = parts[1] if len(parts) > 1 else ""
    return keys, runs, settings, claims, meta


def run_label(out, name, labels):
    """A run's settings string (`attention=softmax,seed=1`; docs/ablations.md, "Run names"):
    the run_settings row of ablate_sweep.tsv, else the "settings" of its ablate_status.json or
    provenance.json, else its folder name."""
    if name in labels:
        return labels[name]
    for f in ("ablate_status.json", "provenance.json"):
        try:
            with open(os.path.join(out, name, f)) as fh:
                v = json.load(fh).get("settings")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(v, str) and v:
            return v
    return name


def read_config(path):
    """The resolved config.conf of a run (key = value lines), as a dict of strings."""
    cfg = {}
    if not os.path.exists(path):
        return cfg
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#") or "=" not in line:
                continue
            k, _, v = line.partition("=")
            v = re.sub(r"\s+#.*$", "", v.strip())
            cfg[k.strip()] = v.strip().strip('"')
    return cfg


def run_metrics(d):
    """Every column derived from one run directory."""
    r = {"status": "not run", "steps": 0, "wall_s": None, "diverged": 0}
    st_path = os.path.join(d, "ablate_status.json")
    rc, reused = None, None
    if os.path.exists(st_path):
        with open(st_path) as f:
            st = json.load(f)
        rc = st.get("exit")
        r["wall_s"] = st.get("wall_s")
        reused = st.get("reused_from")
    train, evals, model, heads, events = [], [], [], {}, []
    mpath = os.path.join(d, "metrics.jsonl")
    if not os.path.exists(mpath) and os.path.exists(mpath + ".gz"):
        mpath += ".gz"  # a committed result (scripts/results_export)
    if os.path.exists(mpath):
        opener = gzip.open if mpath.endswith(".gz") else open
        with opener(mpath, "rt") as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue  # a line cut by an interruption
                kind = rec.get("kind")
                if kind == "model":
                    model.append(rec)
                elif kind == "head":
                    heads.setdefault(rec.get("step"), []).append(rec)
                elif "event" in rec:
                    events.append(rec)
                elif "train_loss" in rec:
                    train.append(rec)
                elif "val_loss" in rec:
                    evals.append(rec)
    train.sort(key=lambda x: x["step"])
    evals.sort(key=lambda x: x["step"])
    cfg = read_config(os.path.join(d, "config.conf"))
    max_steps = int(float(cfg.get("max_steps", "0") or 0))
    r["steps"] = train[-1]["step"] if train else 0
    vl = [fnum(e["val_loss"]) for e in evals]
    tl = [fnum(t["train_loss"]) for t in train]
    r["val_loss"] = vl[-1] if vl else None
    fin = [v for v in vl if finite(v)]
    r["best_val_loss"] = min(fin) if fin else None
    r["train_loss"] = tl[-1] if tl else None
    r["step_ms"] = median([fnum(t.get("step_ms")) for t in train])
    r["tok_per_s"] = median([fnum(t.get("tok_per_s")) for t in train])
    last = model[-1] if model else {}
    for k in ("sink_rate", "sink_rate_raw", "kurtosis_mean", "kurtosis_max", "max_abs_act",
              "massive_ratio_max"):
        r[k] = fnum(last.get(k))
    # the positive control on the last metrics step: heads of layers >= 1 that sink
    hl = [h for h in heads.get(max(heads), []) if h.get("layer", 0) >= 1] if heads else []
    fr = [fnum(h.get("sink_frac_raw")) for h in hl]
    fr = [f for f in fr if finite(f)]
    r["sink_heads_l1"] = sum(f >= CONTROL_SINK_FRAC for f in fr) / len(fr) if fr else None
    km, mr = r.get("kurtosis_max"), r.get("massive_ratio_max")
    sr = r.get("sink_rate")
    r["control_sink"] = int(sr is not None and finite(sr) and sr >= CONTROL_GU_RATE)
    r["control_outlier"] = int(any(finite(v) and v >= CONTROL_OUTLIER for v in (km, mr)
                                   if v is not None))
    if heads:
        hs = heads[max(heads)]
        en = [fnum(h.get("entropy_norm")) for h in hs]
        en = [e for e in en if finite(e)]
        r["entropy_norm"] = sum(en) / len(en) if en else None
    else:
        r["entropy_norm"] = None
    # gradient-norm spikes against the running median of all earlier steps
    hist, spikes = [], 0
    for t in train:
        g = fnum(t.get("grad_norm"))
        if not finite(g):
            continue
        if len(hist) >= SPIKE_MIN_HISTORY:
            n = len(hist)
            med = hist[n // 2] if n % 2 else 0.5 * (hist[n // 2 - 1] + hist[n // 2])
            if g > SPIKE_FACTOR * med:
                spikes += 1
        bisect.insort(hist, g)
    r["grad_spikes"] = spikes
    nonfinite = any(not finite(v) for v in tl + vl)
    skipped = any(e.get("event") == "skipped_nonfinite" for e in events)
    r["diverged"] = int(bool(rc == 3 or nonfinite or skipped))
    done = max_steps > 0 and os.path.exists(os.path.join(d, "model_%08d.bin" % max_steps))
    prov = os.path.join(d, "provenance.json")  # a committed result (scripts/results_export)
    if not done and os.path.exists(prov):
        with open(prov) as f:
            done = json.load(f).get("final_step") == max_steps
    if rc == 3:
        r["status"] = "diverged"
    elif rc not in (None, 0):
        r["status"] = "failed (exit %d)" % rc
    elif done:
        # a run copied by ablate.reuse: same resolved config, trained in another sweep
        r["status"] = "ok (reused from %s)" % os.path.relpath(reused, os.path.dirname(
            os.path.dirname(reused))) if reused else "ok"
    elif train:
        r["status"] = "incomplete"
    # probe accuracy
    ppath = os.path.join(d, "probe.json")
    if os.path.exists(ppath):
        try:
            with open(ppath) as f:
                p = json.loads(f.readline())
            r["probe_acc"] = p.get("accuracy")
            for b, acc in (p.get("buckets") or {}).items():
                r["probe_acc_" + b] = acc
        except ValueError:
            pass
    # the papers' sink measures of the final checkpoint (./probe sinks, ablate.sinks) and the
    # calibrated sink control (docs/ablations.md, "Calibrated sink control")
    spath = os.path.join(d, "sinks.json")
    if os.path.exists(spath):
        try:
            with open(spath) as f:
                p = json.loads(f.readline())
            r["sink_rate_gu"] = fnum(p.get("sink_rate_gu"))
            r["sink_rate_gu_raw"] = fnum(p.get("sink_rate_gu_raw"))
            r["nontrig_a0_max"] = fnum(p.get("nontrig_a0_max"))
            raw = [fnum(h.get("nontrig_a0_raw")) for h in p.get("heads", [])]
            raw = [v for v in raw if v is not None and finite(v)]
            r["nontrig_a0_max_raw"] = max(raw) if raw else None
            gu, nt = r["sink_rate_gu"], r["nontrig_a0_max"]
            r["control_sink_gu"] = int((gu is not None and finite(gu) and gu >= CONTROL_GU_RATE)
                                       or (nt is not None and finite(nt) and nt >= CONTROL_GUO_A0))
        except ValueError:
            pass
    # long-context losses: "T  2x  all  inside  beyond  tokens" lines of ./evaluate: the loss
    # over all positions, over those inside the training length and over those beyond it ("-"
    # at 1x)
    lpath = os.path.join(d, "long_context.txt")
    if os.path.exists(lpath):
        with open(lpath) as f:
            for line in f:
                m = re.match(r"^\s*\d+\s+(\d+)x\s+(\S+)(?:\s+(\S+)\s+(\S+))?", line)
                if m and fnum(m.group(2)) is not None:
                    r["val_loss_%sx" % m.group(1)] = fnum(m.group(2))
                    if fnum(m.group(3)) is not None:
                        r["val_loss_inside_%sx" % m.group(1)] = fnum(m.group(3))
                    if fnum(m.group(4)) is not None:
                        r["val_loss_beyond_%sx" % m.group(1)] = fnum(m.group(4))
    kpath = os.path.join(d, "passkey.txt")
    if os.path.exists(kpath):
        length, tot = None, {}
        with open(kpath) as f:
            for line in f:
                m = re.match(r"^# passkey: length (\d+)", line)
                if m:
                    length = int(m.group(1))
                m = re.match(r"^(start|middle|end)\s+\S+\s+\S+\s+(\d+)/(\d+)", line)
                if m and length:
                    c, n = tot.get(length, (0, 0))
                    tot[length] = (c + int(m.group(2)), n + int(m.group(3)))
        for length, (c, n) in sorted(tot.items()):
            if n:
                r["passkey_acc_%d" % length] = c / n
    r["_train"] = [(t["step"], fnum(t["train_loss"])) for t in train]
    r["_val"] = [(e["step"], fnum(e["val_loss"])) for e in evals]
    return r


BASE_COLS = ["val_loss", "best_val_loss", "train_loss", "step_ms", "tok_per_s", "sink_rate",
             "sink_rate_raw", "sink_heads_l1", "kurtosis_mean", "kurtosis_max", "max_abs_act",
             "massive_ratio_max", "control_sink", "control_outlier", "entropy_norm",
             "grad_spikes", "diverged"]


def fmt(v, col=""):
    if v is None or v == "":
        return ""
    if isinstance(v, str):
        return v
    if isinstance(v, int) or col in ("grad_spikes", "diverged", "steps", "control_sink",
                                     "control_outlier"):
        return "%d" % v
    if not math.isfinite(v):
        return "nan"
    if col in ("step_ms", "tok_per_s", "max_abs_act", "wall_s") or abs(v) >= 1000:
        return "%.1f" % v if abs(v) < 100 else "%.0f" % v
    return "%.4f" % v


def fmt_mean(v, col):
    """A mean or sd: counts get one decimal, the rest like the per-run cells."""
    if col in ("grad_spikes", "diverged"):
        return "%.1f" % v
    return fmt(float(v), col)


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
    multiplied by FACTOR, in UNIT (bytes per GPT-2 token converts nats per byte into nats per
    GPT-2 token). None when unset."""
    v = (settings or {}).get("loss_unit", "").strip()
    if not v:
        return None
    parts = v.split(None, 1)
    f = fnum(parts[0])
    if f is None or not finite(f) or f <= 0 or len(parts) < 2:
        sys.exit("ablate.loss_unit = '%s': expected 'FACTOR UNIT', e.g. '3.839 nats/GPT-2 token'" % v)
    return f, parts[1].strip()


def evaluate_claim(text, groups, unit=None):
    """'METRIC: A < B | description | claimed: EFFECT' -> dict with the numbers and the verdict.
    The optional `| claimed: ...` part is the paper's claimed effect, printed next to the
    measured one; with `unit` (ablate.loss_unit) a loss difference is also given in that unit."""
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
    a, b = resolve_group(a, groups), resolve_group(b, groups)
    sa = group_stats(groups.get(a, []), metric)
    if fnum(b) is not None and b not in groups:
        sb = {"n": 0, "mean": float(b), "sd": None, "min": float(b), "max": float(b), "vals": []}
    else:
        sb = group_stats(groups.get(b, []), metric)
    res.update(metric=metric, a=a, b=b, op=op, stats_a=sa, stats_b=sb)
    if sa is None or sb is None:
        res.update(verdict="inconclusive", sentence="no values for %s" % (a if sa is None else b))
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
    paired_verdict(res, metric, op, fnum(tol) if tol else 0.0, groups.get(a, []),
                   groups.get(b, []))
    res["measured"] = measured_text(res, metric, unit)
    size_reading(res, metric, unit, sb)
    return res


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


def size_reading(res, metric, unit, sb):
    """measured/claimed for a claim with `size:`, and the split of a directional "reproduced"
    into "sign and size" (the ratio within [1/2, 2]) and "sign only"."""
    if res.get("op") == "~" or "verdict" not in res:
        return
    measured = res.get("paired_mean", res.get("diff"))
    if measured is not None and "size" in res:
        if res["size_relative"]:
            base = sb["mean"] if sb else None
            if base:
                ratio = (100.0 * measured / abs(base)) / res["size"]
                res["measured"] += "; %+.3g%% of %s, measured/claimed = %.3g" % (
                    100.0 * measured / abs(base), res["b"], ratio)
                res["ratio"] = ratio
        else:
            scaled = measured * unit[0] if unit and "loss" in metric else measured
            res["ratio"] = scaled / res["size"]
            res["measured"] += "; measured/claimed = %.3g" % res["ratio"]
    if res["verdict"] == "reproduced":
        r = res.get("ratio")
        res["verdict"] = "reproduced: sign and size" if r is not None and 0.5 <= r <= 2.0 \
            else "reproduced: sign only"


def measured_text(res, metric, unit):
    """The measured effect A - B: the paired mean and 95% interval when there is one, else the
    difference of the group means; for a loss also in ablate.loss_unit."""
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
    return out


def control_column(metric):
    """The positive-control column a claim on `metric` needs, or None."""
    if metric.startswith(("sink_rate_gu", "nontrig_a0")):
        return "control_sink_gu"
    if metric.startswith("sink"):
        return "control_sink"
    if metric.startswith(("kurtosis", "max_abs", "massive")):
        return "control_outlier"
    return None


def paired_verdict(res, metric, op, tol, rows_a, rows_b):
    """With >= 3 seeds run in both groups: the per-seed differences A - B, their mean and 95%
    t interval, and the verdict from the interval (it replaces the range verdict): for < and >
    reproduced when the interval excludes 0 on the claimed side, not reproduced when it excludes
    0 on the other; for ~ TOL reproduced when the interval lies inside [-TOL, TOL], not
    reproduced when it lies outside. A claim on sinks (outliers) is "untestable here" when a seed
    of the group expected to show the phenomenon (B for <, A for >, both for ~) misses the
    positive control."""
    by_seed = lambda rows: {str(r.get("seed")): r for r in rows}
    sa, sb = by_seed(rows_a), by_seed(rows_b)
    pairs = []
    for s in sorted(set(sa) & set(sb), key=lambda x: (len(x), x)):
        va, vb = fnum(sa[s].get(metric)), fnum(sb[s].get(metric))
        if va is not None and vb is not None and finite(va) and finite(vb):
            pairs.append((s, va - vb))
    ctl = control_column(metric)
    if ctl:
        need = rows_b if op == "<" else rows_a if op == ">" else rows_a + rows_b
        if need and not all(r.get(ctl) == 1 for r in need):
            res.update(verdict="untestable here", sentence=res.get("sentence", "") +
                       "; the positive control (%s) is not met in every seed" % ctl)
            res["untestable"] = True
    if len(pairs) < 3:
        return
    d = [x for _, x in pairs]
    n = len(d)
    mean = sum(d) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
    half = t975(n - 1) * sd / math.sqrt(n)
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


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--check-claim":
        err, _ = claim_syntax(sys.argv[2])
        if err:
            print(err)
            sys.exit(1)
        sys.exit(0)
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) == 2 else 2)
    # the plots (ablate_plots.py) need matplotlib: under another python3, re-run under
    # /usr/bin/python3 (scripts/syspython.py); without it anywhere, the report has no plots
    syspython.need("ablate_report.py", "matplotlib", required=False)
    out = sys.argv[1]
    if not os.path.exists(os.path.join(out, "ablate_sweep.tsv")):
        sys.exit("%s: no ablate_sweep.tsv (not a sweep directory made by scripts/ablate)" % out)
    keys, runs, settings, claims, meta = read_sweep(out)
    rows = []
    for name, kv in runs:
        r = run_metrics(os.path.join(out, name))
        r["run"] = name
        r["settings"] = run_label(out, name, meta["run_settings"])
        d = dict(kv)
        r["_kv"] = kv
        for k, v in kv:
            r[k] = v
        cfg = read_config(os.path.join(out, name, "config.conf"))
        if "attention" not in d:
            r["attention"] = cfg.get("attention", "")
        if "seed" not in d:
            r["seed"] = cfg.get("seed", "")
        rows.append(r)
    # A one-key-plus-seed sweep labels groups by the value; extras show as key=value.
    for r in rows:
        parts = []
        for k, v in r["_kv"]:
            if k == "seed":
                continue
            parts.append(v if k in keys else "%s=%s" % (k, v))
        r["group"] = "+".join(parts) if parts else "all"

    extra_keys = []
    for r in rows:
        for k, _ in r["_kv"]:
            if k not in keys and k not in extra_keys and k not in ("attention", "seed"):
                extra_keys.append(k)
    key_cols = [k for k in keys if k not in ("attention", "seed")] + extra_keys
    opt_cols = sorted({k for r in rows for k in r if k.startswith(("probe_acc", "val_loss_",
                                                                    "passkey_acc", "sink_rate_gu",
                                                                    "nontrig_a0", "control_sink_gu"))},
                      key=lambda c: (c.split("_")[0], len(c), c))
    cols = ["run", "settings"] + key_cols + ["attention", "seed", "status", "steps"] + BASE_COLS + opt_cols + \
        ["wall_s"]

    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r in rows:
            w.writerow(["" if r.get(c) is None else r.get(c) for c in cols])

    # groups over seeds
    groups = {}
    for r in rows:
        groups.setdefault(r["group"], []).append(r)
    num_cols = BASE_COLS + opt_cols
    md = []
    title = meta.get("sweep", out)
    md.append("### Sweep `%s`\n" % title)
    md.append("Command: `%s`  " % meta.get("command", ""))
    total = sum(float(r["wall_s"]) for r in rows if r.get("wall_s") is not None)
    nreused = sum(1 for r in rows if r.get("status", "").startswith("ok (reused"))
    md.append("Runs: %d, total training wall time %s%s.\n" % (
        len(rows), dur(total), " (%d runs reused from other sweeps, not counted)" % nreused
        if nreused else ""))
    short = [c for c in cols if c not in ("run", "settings")]  # the key columns say them
    md.append("| " + " | ".join(short) + " |")
    md.append("|" + "---|" * len(short))
    for r in rows:
        md.append("| " + " | ".join(fmt(r.get(c), c) for c in short) + " |")
    nseeds = max(len(g) for g in groups.values()) if groups else 0
    if nseeds > 1:
        md.append("\nMean ± sd over seeds (n = seeds per group):\n")
        gcols = [c for c in num_cols if any(isinstance(r.get(c), (int, float)) for r in rows)]
        md.append("| group | n | " + " | ".join(gcols) + " |")
        md.append("|---|---|" + "---|" * len(gcols))
        for g, rs in groups.items():
            cells = []
            for c in gcols:
                s = group_stats(rs, c)
                if s is None:
                    cells.append("")
                elif s["sd"] is None:
                    cells.append(fmt_mean(s["mean"], c))
                else:
                    cells.append("%s ± %s" % (fmt_mean(s["mean"], c), fmt_mean(s["sd"], c)))
            md.append("| %s | %d | %s |" % (g, len(rs), " | ".join(cells)))
    md.append("")
    unit = loss_unit(settings)
    verdicts = [evaluate_claim(c, groups, unit) for c in claims]
    cm = []
    for v in verdicts:
        line = "- **%s** — %s: %s." % (v["verdict"], v.get("text") or v["claim"], v.get("claim"))
        if v.get("claimed") or v.get("measured"):
            line += " Claimed: %s; measured: %s." % (v.get("claimed") or "(not stated)",
                                                     v.get("measured") or "no values")
        line += " (%s)" % v.get("sentence", "")
        cm.append(line)
    with open(os.path.join(out, "claims.md"), "w") as f:
        f.write("\n".join(cm) + ("\n" if cm else ""))
    with open(os.path.join(out, "claims.json"), "w") as f:
        json.dump(verdicts, f, indent=1)
    if cm:
        md.append("Claims:\n")
        md.extend(cm)
        md.append("")
    plots = make_plots(out, rows, groups, opt_cols)
    if plots:
        md.append("Plots: " + ", ".join("`plots/%s`" % p for p in plots) + "\n")
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(md))
    print("\n".join(md))
    print("wrote %s/results.csv, results.md, claims.md and plots/ (%s)" % (out, ", ".join(plots)))


def dur(s):
    s = int(s)
    if s >= 3600:
        return "%dh%02dm" % (s // 3600, s % 3600 // 60)
    if s >= 60:
        return "%dm%02ds" % (s // 60, s % 60)
    return "%ds" % s


def make_plots(out, rows, groups, opt_cols):
    """OUT_DIR/plots/*.png, drawn by scripts/ablate_plots.py; returns the file names written."""
    import ablate_plots  # scripts/ablate_plots.py, next to this file

    return ablate_plots.make_plots(out, rows, groups, opt_cols, group_stats)


if __name__ == "__main__":
    main()
