"""scripts/ablate_hold.py: the sink control held over time (ablate.sinks_hold = K;
docs/ablations.md, "Sink control held over time").

The rule: a seed holds the control when, at each of the last K kept checkpoints of its
trajectory (sinks.csv, scripts/score_sinks), one and the same head (layer, head) has Guo et
al.'s non-trigger first-token weight (L<l>H<h>_nontrig_a0) of at least 0.5: a dormant head in
Guo's sense, named by the rule, the same head at every one of those checkpoints. Gu's rate alone
does not count, since a head can reach it through the trigger rows (control_bb3l seed 4). The K
checkpoints must span at least SPAN of the run's steps (the first of them at or before step
(1 - SPAN) x max_steps), K >= 3, and the last must be the final step.
"""
import csv
import re

GUO_A0 = 0.5
SPAN = 0.2
MIN_K = 3

_HEAD = re.compile(r"^L(\d+)H(\d+)_nontrig_a0$")


def read_trajectory(path):
    """sinks.csv -> [(step, {(layer, head): non-trigger weight})], in step order."""
    out = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            heads = {}
            for k, v in row.items():
                m = _HEAD.match(k or "")
                if m:
                    try:
                        heads[(int(m.group(1)), int(m.group(2)))] = float(v)
                    except (TypeError, ValueError):
                        pass
            try:
                out.append((int(row["step"]), heads))
            except (KeyError, TypeError, ValueError):
                continue
    out.sort(key=lambda t: t[0])
    return out


def held(traj, k, max_steps):
    """(1 or 0, the head that holds it as 'L<l>H<h>' or why not) for a trajectory of
    read_trajectory, K checkpoints and the run's max_steps."""
    if k < MIN_K:
        return 0, "K = %d < %d" % (k, MIN_K)
    if len(traj) < k:
        return 0, "%d checkpoints, fewer than K = %d" % (len(traj), k)
    last = traj[-k:]
    if last[-1][0] != max_steps:
        return 0, "the last checkpoint is step %d, not max_steps %d" % (last[-1][0], max_steps)
    if last[0][0] > (1.0 - SPAN) * max_steps:
        return 0, "the last %d checkpoints (steps %d-%d) span less than %d%% of %d steps" % (
            k, last[0][0], last[-1][0], round(SPAN * 100), max_steps)
    common = None
    for _, heads in last:
        ok = {h for h, a in heads.items() if a == a and a >= GUO_A0}
        common = ok if common is None else common & ok
    if common:
        l, h = min(common)
        return 1, "L%dH%d" % (l, h)
    return 0, "no one head has a non-trigger first-token weight >= %g at each of steps %s" % (
        GUO_A0, ", ".join(str(s) for s, _ in last))
