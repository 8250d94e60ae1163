#!/usr/bin/python3
"""scripts/ablate_lr.py: learning-rate sensitivity of a sweep over `lr` (scripts/ablate_report.py).

Wortsman et al. 2023, "Small-scale proxies for large-scale Transformer training instabilities"
(arXiv 2309.14322), section 2.2: LR sensitivity = E over the learning-rate grid of
    min(L(eta), L0) - L*
where L(eta) is the final loss of the run at learning rate eta, L0 the loss at initialisation and
L* = min over the grid of L(eta); the expectation is the mean over the grid's points (a log grid,
e.g. 3e-4, 1e-3, ..., 3e-1, so each decade weighs the same). Here L is the final validation loss
(the training loss of the last step when the sweep has no validation data) and L0 the validation
loss at step 0 (else the training loss of step 1, taken before the first update).

A run diverged when it met a non-finite loss or gradient at any step (the trainer's "diverged"
or "skipped_nonfinite" records, or exit 3: whatever nan_policy, a skipped step is a divergence),
or when its final loss is above L0. It is data, not a failed run: it counts as L0, with the step
where it diverged and its last finite loss reported beside it. The largest stable learning rate
of a variant and seed is the largest of the grid whose run did not diverge (lr_max_stable_log10
is its log10, so that seeds are compared in decades). The positive control of a claim on either
metric (control_lr) is that the grid reaches the instability: at least one of the variant's runs
of that seed diverged.

lr_groups(rows, keys) -> ({variant: [one record per seed]}, per-run readings), or (None, None)
when the sweep has no `lr` key; lr_lines(...) the section of results.md.
"""
import math

from ablate_claims import fnum, finite


def variant_label(kv, keys):
    """The group label of a run without its seed and its learning rate."""
    parts = [v if k in keys else "%s=%s" % (k, v) for k, v in kv if k not in ("seed", "lr")]
    return "+".join(parts) if parts else "all"


def run_reading(r):
    """One run's learning-rate reading from its ablate_report record: l0, final, diverged (with
    step, last finite loss and why), or incomplete."""
    val = [(s, v) for s, v in r["_val"]]
    train = [(s, v) for s, v in r["_train"]]
    l0 = next((v for s, v in val if s == 0 and finite(v)), None)
    if l0 is None:
        l0 = next((v for s, v in train if s == 1 and finite(v)), None)
    out = {"lr": fnum(r.get("lr")), "l0": l0, "final": None, "diverged": False, "step": None,
           "last_finite": None, "why": "", "complete": False}
    ev = next((e for e in r["_events"] if e.get("event") in ("diverged", "skipped_nonfinite")), None)
    bad = next((s for s, v in sorted(train + val) if not finite(v)), None)
    if ev is not None or r.get("_exit") == 3 or bad is not None:
        step = ev.get("step") if ev is not None else bad
        if step is None:  # exit 3 without a record: the step after the last one logged
            step = (train[-1][0] + 1) if train else 1
        last = fnum(ev.get("last_finite_loss")) if ev is not None and ev.get("event") == "diverged" \
            else None
        if not finite(last):
            prior = [v for s, v in train if s < step and finite(v)]
            last = prior[-1] if prior else None
        why = "non-finite loss or gradient" + (
            " (update skipped, nan_policy = skip)" if ev is not None and
            ev.get("event") == "skipped_nonfinite" else "")
        out.update(diverged=True, step=step, last_finite=last, why=why, complete=True)
        return out
    if not r.get("_done"):
        return out
    final = val[-1][1] if val else (train[-1][1] if train else None)
    out.update(final=final, complete=finite(final))
    if finite(final) and l0 is not None and final > l0:
        last_step = (val[-1][0] if val else train[-1][0])
        out.update(diverged=True, step=last_step, last_finite=final,
                   why="final loss %.4g above L0 %.4g" % (final, l0))
    return out


def lr_groups(rows, keys):
    """Per variant, one record per seed: seed, lr_sensitivity, lr_max_stable_log10, control_lr,
    l0, l_star, best_lr, the grid's readings; (None, None) without a sweep over lr."""
    if "lr" not in keys and not any(k == "lr" for r in rows for k, _ in r["_kv"]):
        return None, None
    grid = sorted({fnum(r.get("lr")) for r in rows if finite(fnum(r.get("lr")))})
    cells = {}
    for r in rows:
        rd = run_reading(r)
        rd["run"] = r["run"]
        cells.setdefault((variant_label(r["_kv"], keys), str(r.get("seed"))), []).append(rd)
    groups = {}
    for (var, seed), rds in cells.items():
        rec = {"seed": seed, "variant": var, "runs": sorted(rds, key=lambda x: x["lr"] or 0),
               "lr_sensitivity": None, "lr_max_stable_log10": None, "control_lr": 0, "note": ""}
        groups.setdefault(var, []).append(rec)
        have = {x["lr"] for x in rds if x["complete"]}
        missing = [g for g in grid if g not in have]
        l0s = sorted(x["l0"] for x in rds if x["l0"] is not None)
        if missing or not l0s:
            rec["note"] = "incomplete grid (no finished run at lr = %s)" % ", ".join(
                "%g" % g for g in missing) if missing else "no loss at initialisation"
            continue
        l0 = l0s[len(l0s) // 2]
        ok = [x for x in rds if not x["diverged"]]
        rec["control_lr"] = int(len(ok) < len(rds))
        rec["l0"] = l0
        if not ok:
            rec["note"] = "every learning rate of the grid diverged"
            continue
        best = min(ok, key=lambda x: x["final"])
        rec["l_star"], rec["best_lr"] = best["final"], best["lr"]
        by_lr = {x["lr"]: x for x in rds}
        terms = [(l0 if by_lr[g]["diverged"] else min(by_lr[g]["final"], l0)) - best["final"]
                 for g in grid]
        rec["lr_sensitivity"] = sum(terms) / len(terms)
        rec["lr_max_stable"] = max(x["lr"] for x in ok)
        rec["lr_max_stable_log10"] = math.log10(rec["lr_max_stable"])
    for var in groups:
        groups[var].sort(key=lambda x: (len(x["seed"]), x["seed"]))
    return groups, grid


def lr_lines(groups, grid, plot=None):
    """The learning-rate section of a sweep's results.md."""
    if not groups:
        return []
    out = ["LR sensitivity (Wortsman et al. 2023, arXiv 2309.14322, sec. 2.2): the mean over the "
           "grid (lr = %s) of min(L(lr), L0) - L*, L the final validation loss, L0 the loss at "
           "initialisation, L* the best final loss over the grid. A run that met a non-finite "
           "loss or gradient (whatever nan_policy) or ended above L0 diverged and counts as L0."
           % ", ".join("%g" % g for g in grid), "",
           "| variant | seed | L0 | L* (at lr) | LR sensitivity | largest stable lr | diverged runs |",
           "|---|---|---|---|---|---|---|"]
    for var, recs in groups.items():
        for rec in recs:
            div = "; ".join(
                "lr %g: step %s, last finite loss %s%s" % (
                    x["lr"], x["step"], "%.4g" % x["last_finite"] if x["last_finite"] is not None
                    else "none", " (%s)" % x["why"] if x["why"] else "")
                for x in rec["runs"] if x["diverged"]) or "none"
            if rec["lr_sensitivity"] is None:
                out.append("| %s | %s | %s | | %s | | %s |" % (
                    var, rec["seed"], "%.4g" % rec["l0"] if rec.get("l0") else "", rec["note"], div))
                continue
            out.append("| %s | %s | %.4g | %.4g (%g) | %.4g | %g | %s |" % (
                var, rec["seed"], rec["l0"], rec["l_star"], rec["best_lr"], rec["lr_sensitivity"],
                rec["lr_max_stable"], div))
    out += ["", "| variant | seeds | LR sensitivity (mean ± sd) | largest stable lr (per seed) |",
            "|---|---|---|---|"]
    for var, recs in groups.items():
        vals = [r["lr_sensitivity"] for r in recs if r["lr_sensitivity"] is not None]
        if not vals:
            out.append("| %s | 0 | | |" % var)
            continue
        mean = sum(vals) / len(vals)
        sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 \
            else None
        out.append("| %s | %d | %.4g%s | %s |" % (
            var, len(vals), mean, " ± %.2g" % sd if sd is not None else "",
            ", ".join("%g" % r["lr_max_stable"] for r in recs if r.get("lr_max_stable"))))
    if plot:
        out += ["", "Plot: `plots/%s` (final loss against learning rate; a diverged run is drawn "
                "at L0 with a cross)." % plot]
    out.append("")
    return out
