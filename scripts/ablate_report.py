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
settings: SETTINGS` (also `>`, and `~ TOL` for parity within TOL); the syntax and the verdict
rules are scripts/ablate_claims.py's (paired t interval, exact sign-flip p, Holm's correction over
the sweep's claims, the size read from the interval of measured/claimed, the positive controls,
the attribution of each claim to its paper), the statistics scripts/ablate_stats.py's.
`ablate.loss_unit = FACTOR UNIT` also prints loss effects times FACTOR, e.g. nats per byte times
bytes per GPT-2 token. A group is a label of the non-seed swept values (e.g. `softmax1`, or
`quantized+attn.levels=8`; the part before '+' suffices when it is unique); GROUP_B may be a
number. In a sweep over `lr`, the learning-rate sensitivity of each variant and seed and its
largest stable learning rate (scripts/ablate_lr.py) are reported, drawn (plots/lr.png) and can be
claimed on (`lr_sensitivity`, `lr_max_stable_log10`; their groups are the variants without the
learning rate).
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
import ablate_lr
import ablate_hold
from ablate_claims import (claim_syntax, correct_family, evaluate_claim, finite, fnum,
                           group_stats, loss_unit)

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
# The streaming control (ablate.stream; docs/streaming.md): evicting the first tokens hurts
# softmax when its window-only loss exceeds its sinks + window loss by at least
# CONTROL_STREAM_GAP nats over the text, that is a perplexity at least twice as high
# (StreamingLLM, Xiao et al. 2309.17453, Fig. 3: window attention collapses, sinks restore it).
CONTROL_STREAM_GAP = math.log(2.0)
STREAM_POLICIES = ("window", "sinks", "recompute")


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
    # a non-finite value at any step, whatever nan_policy: skipped, or the trainer's "diverged"
    # record of a run that stopped on one (a run trained outside scripts/ablate has no exit code)
    skipped = any(e.get("event") in ("skipped_nonfinite", "diverged") for e in events)
    r["diverged"] = int(bool(rc == 3 or nonfinite or skipped))
    done = max_steps > 0 and os.path.exists(os.path.join(d, "model_%08d.bin" % max_steps))
    prov = os.path.join(d, "provenance.json")  # a committed result (scripts/results_export)
    if not done and os.path.exists(prov):
        with open(prov) as f:
            done = json.load(f).get("final_step") == max_steps
    if rc == 3 or (rc is None and any(e.get("event") == "diverged" for e in events)):
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
    # streaming evaluation (ablate.stream): "# stream: policy POLICY, ..." then "loss L perplexity P
    # tokens N ..." per policy (./evaluate --stream); stream_gap = window-only loss - sinks +
    # window loss (nats), its control control_stream (CONTROL_STREAM_GAP)
    tpath = os.path.join(d, "stream.txt")
    if os.path.exists(tpath):
        pol = None
        with open(tpath) as f:
            for line in f:
                m = re.match(r"^# stream: policy (\w+)", line)
                if m:
                    pol = m.group(1) if m.group(1) in STREAM_POLICIES else None
                m = re.match(r"^loss (\S+) perplexity (\S+) tokens \d+", line)
                if m and pol:
                    r["stream_loss_" + pol] = fnum(m.group(1))
                    r["stream_ppl_" + pol] = fnum(m.group(2))
                    pol = None
        lw, ls = r.get("stream_loss_window"), r.get("stream_loss_sinks")
        if lw is not None and ls is not None and finite(lw) and finite(ls):
            r["stream_gap"] = lw - ls
            r["control_stream"] = int(lw - ls >= CONTROL_STREAM_GAP)
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
    r["_events"], r["_exit"], r["_done"] = events, rc, bool(done)
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
        # ablate.sinks_hold = K: the sink control held at each of the last K checkpoints through
        # one dormant head (scripts/ablate_hold.py); it replaces control_sink_gu as the gate
        hold = settings.get("sinks_hold")
        spath = os.path.join(out, name, "sinks.csv")
        if hold and os.path.exists(spath):
            ms = fnum(cfg.get("max_steps"))
            r["control_sink_held"], r["control_sink_held_by"] = ablate_hold.held(
                ablate_hold.read_trajectory(spath), int(hold), int(ms) if ms else -1)
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
                                                                    "nontrig_a0", "control_sink_gu",
                                                                    "stream_", "control_stream",
                                                                    "control_sink_held"))},
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
    # a sweep over the learning rate: sensitivity and largest stable lr per variant and seed
    lr_groups, grid = ablate_lr.lr_groups(rows, keys)
    unit = loss_unit(settings)
    verdicts = correct_family([evaluate_claim(c, groups, unit, lr_groups) for c in claims])
    cm = []
    for v in verdicts:
        un = v.get("verdict_unadjusted", v["verdict"])
        line = "- **%s**%s — %s: %s." % (v["verdict"], " (unadjusted: %s)" % un
                                         if un != v["verdict"] else "",
                                         v.get("text") or v["claim"], v.get("claim"))
        if v.get("paper"):
            line += " Paper: %s%s." % (v["paper"], "; " + v["paper_note"]
                                       if v.get("paper_note") else "")
        if v.get("claimed") or v.get("measured"):
            line += " Claimed: %s; measured: %s." % (v.get("claimed") or "(not stated)",
                                                     v.get("measured") or "no values")
        line += " (%s)" % v.get("sentence", "")
        cm.append(line)
    with open(os.path.join(out, "claims.md"), "w") as f:
        f.write("\n".join(cm) + ("\n" if cm else ""))
    with open(os.path.join(out, "claims.json"), "w") as f:
        json.dump(verdicts, f, indent=1)
    lr_plot = make_lr_plot(out, lr_groups, grid) if lr_groups else None
    md.extend(ablate_lr.lr_lines(lr_groups, grid, lr_plot))
    if cm:
        md.append("Claims (Holm's correction over this sweep's tested claims; the verdict is the "
                  "corrected one):\n")
        md.extend(cm)
        md.append("")
    plots = make_plots(out, rows, groups, opt_cols) + ([lr_plot] if lr_plot else [])
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


def make_lr_plot(out, lr_groups, grid):
    """OUT_DIR/plots/lr.png (scripts/ablate_plots.py), or None."""
    import ablate_plots

    return ablate_plots.lr_plot(out, lr_groups, grid)


if __name__ == "__main__":
    main()
