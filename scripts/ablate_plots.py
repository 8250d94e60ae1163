#!/usr/bin/python3
"""scripts/ablate_plots.py: the plots of a sweep report, for scripts/ablate_report.py.

make_plots(out, rows, groups, opt_cols, group_stats) writes OUT_DIR/plots/*.png and returns the
file names written (none, with a message, when matplotlib is missing):
  loss.png         train (moving average) and validation loss of every run: colour = group,
                   line style = seed
  loss_seeds.png   validation loss per group: mean over seeds, band = min..max (only when a
                   group has several seeds)
  diagnostics.png  per group: bar = mean over seeds, whiskers = min..max, dots = seeds, of the
                   losses and diagnostics
  probes.png       the same for the probe-accuracy and long-context columns (opt_cols)
lr_plot(out, lr_groups, grid) writes OUT_DIR/plots/lr.png for a sweep over the learning rate
(scripts/ablate_lr.py), Wortsman et al.'s figure: final loss against learning rate (log axis), one
colour per variant, a thin line per seed, the mean over seeds thick; a diverged run is drawn at
L0 with a cross; the legend gives each variant's mean LR sensitivity.
rows are ablate_report's per-run records (with the "_train" and "_val" curves), groups maps each
group label to its rows, and group_stats is the reduction over a group's seeds that the claims
use (scripts/ablate_claims.py), so
that bars and tables show the same numbers.
"""
import math
import os
import sys


def finite(v):
    return v is not None and math.isfinite(v)


def make_plots(out, rows, groups, opt_cols, group_stats):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is missing (apt-get install python3-matplotlib): no plots",
              file=sys.stderr)
        return []
    pdir = os.path.join(out, "plots")
    os.makedirs(pdir, exist_ok=True)
    made = []
    gnames = list(groups)
    if len(gnames) <= 10:
        palette = list(plt.get_cmap("tab10").colors)
    else:  # up to 40 distinct colours (sweep (a) has 27 groups)
        palette = list(plt.get_cmap("tab20").colors) + list(plt.get_cmap("tab20b").colors)
    color = {g: palette[i % len(palette)] for i, g in enumerate(gnames)}
    styles = ["-", "--", ":", "-."]

    def smooth(ys, k):
        outv, acc = [], []
        for y in ys:
            acc.append(y)
            if len(acc) > k:
                acc.pop(0)
            fin = [a for a in acc if finite(a)]
            outv.append(sum(fin) / len(fin) if fin else float("nan"))
        return outv

    # loss curves overlaid, one line per run (colour = group, line style = seed), labelled by
    # the run's settings string (attention=softmax,seed=1), not its folder name
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.5))
    for r in rows:
        g = r["group"]
        seeds = [x["seed"] for x in groups[g]]
        ls = styles[seeds.index(r["seed"]) % len(styles)] if r["seed"] in seeds else "-"
        if r["_train"]:
            st, ys = zip(*r["_train"])
            k = max(1, len(ys) // 50)
            ax[0].plot(st, smooth(ys, k), ls, color=color[g], lw=1.2,
                       label=r.get("settings") or r["run"])
        if r["_val"]:
            st, ys = zip(*r["_val"])
            ax[1].plot(st, ys, ls, color=color[g], marker="o", ms=3, lw=1.2,
                       label=r.get("settings") or r["run"])
    late = [v for r in rows for s_, v in r["_val"] + r["_train"] if finite(v) and s_ > 0 and
            s_ >= 0.1 * max(1, r["steps"])]
    if late:
        lo, hi = min(late), max(late)
        pad = 0.1 * (hi - lo) + 1e-3
        for a in ax:
            a.set_ylim(lo - pad, hi + 3 * pad)
    ax[0].set_title("train loss (moving average)")
    ax[1].set_title("validation loss")
    for a in ax:
        a.set_xlabel("step")
        a.grid(alpha=0.3)
    if len(rows) <= 8:
        ax[1].legend(fontsize=7, loc="upper right")
    else:  # many runs: the legend goes beside the plots, not over the curves
        h, lab = ax[1].get_legend_handles_labels()
        fig.legend(h, lab, fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    fig.savefig(os.path.join(pdir, "loss.png"), dpi=110, bbox_inches="tight")
    plt.close(fig)
    made.append("loss.png")

    # mean +- spread over seeds of the validation curves
    if any(len(rs) > 1 for rs in groups.values()):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for g, rs in groups.items():
            curves = [dict(r["_val"]) for r in rs if r["_val"]]
            if not curves:
                continue
            steps = sorted(set.intersection(*[set(c) for c in curves]))
            if not steps:
                continue
            mean, lo, hi = [], [], []
            for s in steps:
                v = [c[s] for c in curves if finite(c[s])]
                mean.append(sum(v) / len(v) if v else float("nan"))
                lo.append(min(v) if v else float("nan"))
                hi.append(max(v) if v else float("nan"))
            ax.plot(steps, mean, color=color[g], lw=1.5, label="%s (n=%d)" % (g, len(curves)))
            ax.fill_between(steps, lo, hi, color=color[g], alpha=0.2)
        late = [v for rs in groups.values() for r in rs for s_, v in r["_val"]
                if finite(v) and s_ > 0 and s_ >= 0.1 * max(1, r["steps"])]
        if late:  # the first evaluation (ln V) would flatten every difference
            lo, hi = min(late), max(late)
            pad = 0.1 * (hi - lo) + 1e-3
            ax.set_ylim(lo - pad, hi + 3 * pad)
        ax.set_xlabel("step")
        ax.set_ylabel("validation loss")
        ax.set_title("validation loss: mean over seeds, band = min..max")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(pdir, "loss_seeds.png"), dpi=110)
        plt.close(fig)
        made.append("loss_seeds.png")

    def bars(cols, fname, title):
        cols = [c for c in cols if any(isinstance(r.get(c), (int, float)) and
                                       finite(float(r.get(c))) for r in rows)]
        if not cols:
            return
        n = len(cols)
        ncol = min(3, n)
        nrow = (n + ncol - 1) // ncol
        fig, axs = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 3.4 * nrow), squeeze=False)
        for i, c in enumerate(cols):
            a = axs[i // ncol][i % ncol]
            for j, g in enumerate(gnames):
                s = group_stats(groups[g], c)
                if s is None:
                    continue
                # (clamped: the mean of equal values can round past them)
                err = [[max(0.0, s["mean"] - s["min"])], [max(0.0, s["max"] - s["mean"])]]
                a.bar(j, s["mean"], color=color[g], alpha=0.75,
                      yerr=err if s["n"] > 1 else None, capsize=3)
                a.scatter([j] * s["n"], s["vals"], color="k", s=8, zorder=3)
            a.set_xticks(range(len(gnames)))
            a.set_xticklabels(gnames, rotation=45, ha="right", fontsize=7)
            a.set_title(c, fontsize=9)
            vals = [float(r[c]) for r in rows if isinstance(r.get(c), (int, float)) and
                    finite(float(r[c]))]
            if "loss" in c and vals:
                # losses differ by hundredths: a zero-based axis would hide every difference
                lo, hi = min(vals), max(vals)
                pad = max(0.1 * (hi - lo), 0.005)
                a.set_ylim(lo - 2 * pad, hi + pad)
                a.set_title(c + " (axis zoomed)", fontsize=9)
            a.grid(axis="y", alpha=0.3)
        for i in range(n, nrow * ncol):
            axs[i // ncol][i % ncol].axis("off")
        fig.suptitle(title, fontsize=10)
        fig.tight_layout()
        fig.savefig(os.path.join(pdir, fname), dpi=110)
        plt.close(fig)
        made.append(fname)

    bars(["val_loss", "best_val_loss", "sink_rate", "kurtosis_mean", "kurtosis_max",
          "max_abs_act", "entropy_norm", "grad_spikes", "tok_per_s"], "diagnostics.png",
         "per group: bar = mean over seeds, whiskers = min..max, dots = seeds")
    extra = [c for c in opt_cols]
    if extra:
        bars(extra, "probes.png", "probe accuracy / long-context loss (mean over seeds, min..max)")
    return made


def lr_plot(out, lr_groups, grid):
    """OUT_DIR/plots/lr.png; returns its name, or None (no matplotlib, no data)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is missing (apt-get install python3-matplotlib): no plots",
              file=sys.stderr)
        return None
    if not lr_groups or not grid:
        return None
    pdir = os.path.join(out, "plots")
    os.makedirs(pdir, exist_ok=True)
    palette = list(plt.get_cmap("tab10").colors)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (var, recs) in enumerate(lr_groups.items()):
        c = palette[i % len(palette)]
        curves = []
        for rec in recs:
            l0 = rec.get("l0")
            pts = []
            for x in rec["runs"]:
                if x["lr"] is None:
                    continue
                if x["diverged"]:
                    if l0 is not None:
                        pts.append((x["lr"], l0))
                        ax.scatter([x["lr"]], [l0], marker="x", color=c, s=40, zorder=3)
                elif finite(x["final"]):
                    pts.append((x["lr"], x["final"]))
            pts.sort()
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "-", color=c, lw=0.7,
                        alpha=0.5, marker="o", ms=3)
                curves.append(dict(pts))
        sens = [r["lr_sensitivity"] for r in recs if r["lr_sensitivity"] is not None]
        xs = [g for g in grid if curves and all(g in cv for cv in curves)]
        if xs:
            ax.plot(xs, [sum(cv[g] for cv in curves) / len(curves) for g in xs], "-", color=c,
                    lw=2.2, label="%s (LR sensitivity %s, n=%d)" % (
                        var, "%.3g" % (sum(sens) / len(sens)) if sens else "n/a", len(curves)))
    ax.set_xscale("log")
    ax.set_xlabel("learning rate")
    ax.set_ylabel("final loss (diverged: L0, x)")
    ax.set_title("final loss against learning rate (thin: seeds, thick: mean)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(pdir, "lr.png"), dpi=110)
    plt.close(fig)
    return "lr.png"
