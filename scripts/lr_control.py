#!/usr/bin/env python3
"""scripts/lr_control.py: the rule of the stability control (configs/ablations/s_lr_control.conf),
checked on a sweep's runs or its committed results.

    scripts/lr_control.py DIR [--variant A] [--with-norm B] [--grow-lr X] [--base-lr Y]

DIR is a sweep directory or its committed results (results/s_lr_control). The control holds in a
seed when (1) the LR sensitivity of A (default softmax) is larger than that of B (default
softmax+qk_norm=1), both computed by scripts/ablate_lr.py as the sweep's report does, and (2) A's
largest max_logit over its run at lr = X (default 0.1) is at least 10x its largest at lr = Y
(default 0.001) and at least 10x B's at lr = X. The control holds when it holds in every seed.
It also reports output-logit divergence: a run whose log_z_mean falls below -5 at a metrics step.

Prints one line per seed and the verdict; exit 0 when the control holds, 1 when it does not,
2 on unreadable input (naming the file).
"""
import gzip
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ablate_lr  # noqa: E402
from ablate_report import read_sweep, run_metrics  # noqa: E402

GROWTH = 10.0   # rule (2): the factor of attention-logit growth
LOGZ_DIVERGED = -5.0


def model_records(run_dir):
    """The "kind":"model" records of a run's metrics (metrics.jsonl or .gz), in step order."""
    for name in ("metrics.jsonl", "metrics.jsonl.gz"):
        p = os.path.join(run_dir, name)
        if os.path.exists(p):
            break
    else:
        return []
    opener = gzip.open if p.endswith(".gz") else open
    out = []
    with opener(p, "rt") as f:
        for i, line in enumerate(f, 1):
            try:
                r = json.loads(line)
            except ValueError:
                sys.stderr.write("lr_control: %s:%d: not JSON\n" % (p, i))
                sys.exit(2)
            if isinstance(r, dict) and r.get("kind") == "model":
                out.append(r)
    return out


def finite(x):
    return isinstance(x, (int, float)) and math.isfinite(x)


def main(argv):
    args = {"--variant": "softmax", "--with-norm": "softmax+qk_norm=1", "--grow-lr": "0.1",
            "--base-lr": "0.001"}
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    d = argv[0]
    rest = argv[1:]
    while rest:
        if rest[0] not in args or len(rest) < 2:
            sys.stderr.write("lr_control: unknown or incomplete option %r\n" % rest[0])
            return 2
        args[rest[0]] = rest[1]
        rest = rest[2:]
    a, b = args["--variant"], args["--with-norm"]
    try:
        grow_lr, base_lr = float(args["--grow-lr"]), float(args["--base-lr"])
    except ValueError:
        sys.stderr.write("lr_control: --grow-lr and --base-lr take numbers\n")
        return 2
    if not os.path.exists(os.path.join(d, "ablate_sweep.tsv")):
        sys.stderr.write("lr_control: %s: no ablate_sweep.tsv (not a sweep directory)\n" % d)
        return 2
    keys, runs, _, _, _ = read_sweep(d)
    rows = []
    for name, kv in runs:
        r = run_metrics(os.path.join(d, name))
        r["run"], r["_kv"] = name, kv
        for k, v in kv:
            r[k] = v
        rows.append(r)
    groups, _grid = ablate_lr.lr_groups(rows, keys)
    if not groups or a not in groups or b not in groups:
        sys.stderr.write("lr_control: %s: no lr sweep with variants %r and %r (have: %s)\n"
                         % (d, a, b, ", ".join(sorted(groups or {}))))
        return 2
    peak = {}  # (variant, seed, lr) -> largest max_logit over the run
    for r in rows:
        recs = model_records(os.path.join(d, r["run"]))
        ml = [x.get("max_logit") for x in recs if finite(x.get("max_logit"))]
        var = ablate_lr.variant_label(r["_kv"], keys)
        peak[(var, str(r.get("seed")), float(r.get("lr")))] = max(ml) if ml else None
        lz = [x.get("log_z_mean") for x in recs if finite(x.get("log_z_mean"))]
        if lz and min(lz) < LOGZ_DIVERGED:
            print("output-logit divergence: %s (log_z_mean %.3g)" % (r["run"], min(lz)))
    by_seed_b = {rec["seed"]: rec for rec in groups[b]}
    holds_all, nseeds = True, 0
    for rec in groups[a]:
        s = rec["seed"]
        nseeds += 1
        rb = by_seed_b.get(s)
        sa, sb = rec.get("lr_sensitivity"), rb.get("lr_sensitivity") if rb else None
        one = finite(sa) and finite(sb) and sa > sb
        pa_hi, pa_lo = peak.get((a, s, grow_lr)), peak.get((a, s, base_lr))
        pb_hi = peak.get((b, s, grow_lr))
        two = (finite(pa_hi) and finite(pa_lo) and finite(pb_hi) and pa_hi >= GROWTH * pa_lo and
               pa_hi >= GROWTH * pb_hi)
        holds = one and two
        holds_all = holds_all and holds
        print("seed %s: (1) LR sensitivity %s %s vs %s %s: %s; (2) max_logit %s at lr %g, %s at "
              "lr %g, %s %s at lr %g: %s -> %s" % (
                  s, a, "%.4g" % sa if finite(sa) else "none", b,
                  "%.4g" % sb if finite(sb) else "none", "holds" if one else "fails",
                  "%.4g" % pa_hi if finite(pa_hi) else "none", grow_lr,
                  "%.4g" % pa_lo if finite(pa_lo) else "none", base_lr, b,
                  "%.4g" % pb_hi if finite(pb_hi) else "none", grow_lr,
                  "holds" if two else "fails", "holds" if holds else "FAILS"))
    ok = holds_all and nseeds > 0
    print("control %s in %s (%d seeds)" % ("holds" if ok else "does not hold", d, nseeds))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
