#!/usr/bin/python3
"""scripts/results_scale.py: the "Out of reach on a CPU" section of docs/results.md
(scripts/results_report): the training throughput measured by the committed runs, and the hours
the papers' own scales would take at it.

Throughput: the softmax runs of every committed sweep (results/*/<run>/metrics.jsonl.gz), grouped
by the machine that trained them (the run event's CPU, precision and threads) and the model's
shape; per group the median over runs of each run's median tok_per_s, and the FLOP rate it means,
FLOPs per token x tokens per second with the trainer's count (model/gpt2.c, gpt2_flops_per_token:
6 N + 12 L T C, N the parameters without the position table). For each machine the largest model
trained on it is kept (its rate is the nearest to a larger model's).

Hours at a paper's scale: 6 N D FLOPs (N parameters, D tokens; the attention term left out, so
the hours are a lower bound at the same FLOP rate) divided by the measured rate of one machine,
per billion tokens, and at 20 tokens per parameter (compute-optimal, Hoffmann et al. 2022), and
at the paper's own token budget where the paper states it.
"""
import glob
import gzip
import json
import os

# (paper, model, parameters, tokens of its own budget or None)
PAPER_SCALES = [
    ("Gu et al. 2410.10781 (attention sinks)", "LLaMA-style, the default", 60e6, 5e9),
    ("Bondarenko et al. 2306.12929 (outliers)", "OPT-125m", 125e6, None),
    ("Zuhri et al. 2504.20966 (softpick)", "340M", 340e6, None),
    ("Gu et al. 2410.10781 (attention sinks)", "the largest, 1B", 1e9, None),
    ("Zuhri et al. 2504.20966 (softpick)", "1.8B", 1.8e9, None),
]


def read_conf(path):
    cfg = {}
    with open(path) as f:
        for line in f:
            if "=" in line and not line.lstrip().startswith("#"):
                k, _, v = line.partition("=")
                cfg[k.strip()] = v.split("#")[0].strip().strip('"')
    return cfg


def flops_per_token(cfg):
    """The trainer's count for a softmax GPT-2 of this config (model/gpt2.c)."""
    L, C, V = int(cfg["n_layer"]), int(cfg["n_embd"]), int(cfg["vocab_size"])
    T = int(cfg["seq_len"])
    per_layer = 4 * C * C + 4 * C + 2 * C  # ln_1, qkv, projection
    if cfg.get("mlp", "1") != "0":
        per_layer += 8 * C * C + 5 * C + 2 * C  # ln_2, fc, fc projection
    n = V * C + L * per_layer + 2 * C
    return 6.0 * n + 12.0 * L * T * C, n


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def throughput(dirs):
    """One row per machine: cpu, precision, threads, model, params, tok/s, GFLOP/s, runs, sweeps."""
    groups = {}
    for d in dirs:
        for m in sorted(glob.glob(os.path.join(d, "*", "metrics.jsonl.gz"))):
            run = os.path.dirname(m)
            cpath = os.path.join(run, "config.conf")
            if not os.path.exists(cpath):
                continue
            cfg = read_conf(cpath)
            if cfg.get("attention") != "softmax" or not cfg.get("n_layer"):
                continue
            ev, tps = None, []
            with gzip.open(m, "rt") as f:
                for line in f:
                    try:
                        r = json.loads(line)
                    except ValueError:
                        continue
                    if r.get("event") == "run" and ev is None:
                        ev = r
                    if isinstance(r.get("tok_per_s"), (int, float)) and "train_loss" in r:
                        tps.append(r["tok_per_s"])
            if ev is None or not tps or not ev.get("cpu"):
                continue
            fpt, n = flops_per_token(cfg)
            shape = "%s x %s, T = %s%s" % (cfg["n_layer"], cfg["n_embd"], cfg["seq_len"],
                                           "" if cfg.get("mlp", "1") != "0" else ", no MLP")
            key = (ev["cpu"], ev.get("precision", "?"), ev.get("threads"), shape)
            g = groups.setdefault(key, {"n": n, "fpt": fpt, "tps": [], "sweeps": set()})
            g["tps"].append(median(tps))
            g["sweeps"].add(os.path.basename(os.path.normpath(d)))
    best = {}
    for (cpu, prec, th, shape), g in groups.items():
        k = (cpu, prec, th)
        if k not in best or g["n"] > best[k][1]["n"]:
            best[k] = (shape, g)
    rows = []
    for (cpu, prec, th), (shape, g) in sorted(best.items(), key=lambda kv: str(kv[0])):
        tps = median(g["tps"])
        rows.append({"cpu": cpu, "precision": prec, "threads": th, "model": shape, "params": g["n"],
                     "tok_s": tps, "gflops": g["fpt"] * tps / 1e9, "runs": len(g["tps"]),
                     "sweeps": ", ".join(sorted(g["sweeps"]))})
    return rows


def fmt_hours(h):
    if h >= 24 * 365 * 1.5:
        return "%.0f years" % (h / 24 / 365)
    if h >= 48:
        return "%.0f days" % (h / 24)
    return "%.1f h" % h


def scale_lines(dirs):
    rows = throughput(dirs)
    if not rows:
        return []
    out = ["## Out of reach on a CPU", "",
           "The papers' claims come from models of 60M to 1.8B parameters trained on billions of "
           "tokens; the largest model the sweeps here train has %.1fM parameters and trains for "
           "minutes. The throughput the committed runs measured (softmax runs, the median over each run's "
           "steps, then over runs; for each machine its largest model), and the FLOP rate it "
           "means (scripts/results_scale.py):" % (max(r["params"] for r in rows) / 1e6), "",
           "| machine | precision | threads | model (layers x width) | parameters (without the position "
           "table) | tokens/s | "
           "GFLOP/s | runs | sweeps |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append("| %s | %s | %s | %s | %.2fM | %.0f | %.1f | %d | %s |" % (
            r["cpu"], r["precision"], r["threads"], r["model"], r["params"] / 1e6, r["tok_s"],
            r["gflops"], r["runs"], r["sweeps"]))
    out += ["", "What the papers' scales would take at those rates (6 x parameters x tokens FLOPs, "
            "the attention term left out, so at least this long; the same FLOP rate assumed for "
            "the larger model). Per machine: hours per billion tokens / at 20 tokens per "
            "parameter (compute-optimal) / at the paper's own budget where it states one. The runs used "
            "one thread; n cores divide these at best by n.", ""]
    head = "| paper | model | parameters | tokens |"
    for r in rows:
        head += " %s, %s, %s thread%s |" % (r["cpu"], r["precision"], r["threads"],
                                           "" if r["threads"] == 1 else "s")
    out += [head, "|---|---|---|---|" + "---|" * len(rows)]
    for paper, model, n, budget in PAPER_SCALES:
        cells = []
        for r in rows:
            rate = r["gflops"] * 1e9 * 3600  # FLOPs per hour
            per_b = 6 * n * 1e9 / rate
            txt = "%s / %s" % (fmt_hours(per_b), fmt_hours(6 * n * 20 * n / rate))
            if budget:
                txt += " / %s" % fmt_hours(6 * n * budget / rate)
            cells.append(txt)
        out.append("| %s | %s | %s | %s | %s |" % (
            paper, model, "%gM" % (n / 1e6) if n < 1e9 else "%gB" % (n / 1e9),
            "%gB (the paper's)" % (budget / 1e9) if budget else "not restated here",
            " | ".join(cells)))
    out.append("")
    return out
