#!/usr/bin/python3
"""scripts/ablate_plan.py: the sweep runner's (scripts/ablate) checks and estimates that need
the trainer's key table: the values of every sweep line resolved as ./train will read them
(duplicates refused), and --dry-run's time estimate from the project's step-time model. Reads,
never writes.

  ablate_plan.py values TRAIN SWEEP     stdin: LINE<TAB>KEY<TAB>V1<US>V2... per sweep.* line
                                        (US = \\x1f); exit 2 with a message naming SWEEP:LINE
                                        and the key when two values of a line are one setting
                                        to the trainer, or a value the trainer refuses
  ablate_plan.py estimate TRAIN SWEEP OUT [--results DIR] [--step-ms MS] [--threads N]
                         [--bench PATH]
                                        stdin: PART<TAB>LEFT<TAB>NAME<TAB>K=V<US>K=V... per
                                        run (LEFT 1: still to train); prints per part
                                        PART<TAB>SECONDS<TAB>HOW (how the runs were estimated)

Values are resolved as common/config_check.c (config_field_set) and attention/hparams.c do:
integer keys through the plain decimal number parser (01, 1.0 and 1e0 are all 1; 1.5 is
refused), the 0|1 keys also from true/yes/on and false/no/off, float keys as the float32 the
trainer stores, choice keys by name, attn.* numbers as float32 and words as they are; other
text keys as written. Key types and defaults come from `./train --help`.

Time per step, in order: the run's own median step_ms (its metrics.jsonl, or the committed
copy in --results); ablate.step_ms; the median over the sweep's measured runs of step_ms x
(this run's FLOPs per step / that run's); else the model FLOPs per step (6N + 12 L T C per
token, model/gpt2.c gpt2_flops_per_token, times B T grad_accum) over the matmul peak (./bench
sgemm-peak or bf16-peak at the run's thread count, or $ATTNLAB_PEAK_GFLOPS) times an MFU of
0.5 (the committed sweeps ran at 0.3-1.0).
"""

import gzip
import json
import math
import os
import re
import statistics
import struct
import subprocess
import sys

US = "\x1f"
MFU_ASSUMED = 0.5


def die(msg):
    sys.stderr.write("ablate: %s\n" % msg)
    sys.exit(2)


def key_table(train):
    """{key: (type, default, range)} from `TRAIN --help`."""
    try:
        out = subprocess.run([train, "--help"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        die("%s --help failed: %s" % (train, e))
    table = {}
    for line in out.splitlines():
        m = re.match(r"^  (\S+)\s+(int|long|float|str)\s+(\"\"|\S+)\s+(.*)$", line)
        if m:
            default = "" if m.group(3) == '""' else m.group(3)
            table[m.group(1)] = (m.group(2), default, m.group(4).strip())
    if "seed" not in table:
        die("%s --help lists no config keys" % train)
    return table


NUM = re.compile(r"^[0-9+\-.eE]+$")  # util_parse_double's characters: no hex, inf or nan


def parse_number(v):
    """util_parse_double: plain decimal notation only; None when the trainer refuses it."""
    if not v or not NUM.match(v):
        return None
    try:
        d = float(v)
    except ValueError:
        return None
    return d if math.isfinite(d) else None


def f32(d):
    try:
        return struct.unpack("f", struct.pack("f", d))[0]
    except OverflowError:
        return d


BOOL = {"true": 1, "yes": 1, "on": 1, "false": 0, "no": 0, "off": 0}


def resolve(table, key, v):
    """(value as the trainer holds it, None) or (None, why the trainer refuses it)."""
    if key.startswith("attn."):
        w = v.rstrip(" \t")
        d = parse_number(w)
        return (("num", f32(d)) if d is not None else ("word", v)), None
    spec = table.get(key)
    if spec is None:
        return ("text", v), None
    typ, _, rng = spec
    if typ == "str":
        if "|" in rng and not rng.startswith("("):
            if v not in rng.split("|"):
                return None, "'%s' is not one of %s" % (v, rng)
        return ("text", v), None
    if rng == "0|1" and v.lower() in BOOL:
        return ("num", BOOL[v.lower()]), None
    d = parse_number(v)
    if d is None:
        return None, "'%s' is not a number" % v
    if typ == "float":
        return ("num", f32(d)), None
    if d != math.floor(d):
        return None, "'%s' is not an integer" % v
    if re.match(r"^\s*[+-]?[0-9]+$", v):  # strtoll: exact above 2^53
        return ("num", int(v)), None
    return ("num", int(d)), None


def strip_value(v):
    v = v.strip()
    if len(v) >= 2 and v[0] == '"' and v[-1] == '"':
        v = v[1:-1]
    return v


def shown(r):
    kind, x = r
    if kind == "num" and isinstance(x, float):
        return "%.9g" % x
    return str(x)


def cmd_values(train, sweep):
    table = key_table(train)
    for line in sys.stdin:
        line = line.rstrip("\n")
        if not line:
            continue
        lineno, key, vals = line.split("\t", 2)
        seen = {}
        for v in vals.split(US):
            if not v:
                continue
            parts = v.split(" + ")
            items = [(key, parts[0])]
            for extra in parts[1:]:
                k, _, x = extra.partition("=")
                items.append((strip_value(k), strip_value(x)))
            settings = {}
            for k, x in items:
                r, why = resolve(table, k, x)
                if why:
                    die("%s:%s: sweep.%s: %s: %s (./train refuses it)" % (sweep, lineno, key, k, why))
                settings[k] = r
            ident = tuple(sorted(settings.items()))
            if ident in seen:
                same = ", ".join("%s = %s" % (k, shown(r)) for k, r in sorted(settings.items()))
                die("%s:%s: sweep.%s: '%s' and '%s' are the same setting to the trainer (%s): "
                    "each run would be trained, and counted, twice" % (sweep, lineno, key,
                                                                     seen[ident], v, same))
            seen[ident] = v


# ---- the estimate ---------------------------------------------------------------------------


def conf_read(path, into, depth=0):
    """key = value lines of a config file and its includes (last setting wins); sweep.* and
    ablate.* lines are skipped."""
    if depth > 16:
        return
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return
    for line in lines:
        s = line.strip()
        if not s or s.startswith("#") or "=" not in s:
            continue
        k, _, v = s.partition("=")
        k = k.strip().lstrip("-")
        v = v.strip()
        if v.startswith('"'):
            end = v.find('"', 1)
            v = v[1:end] if end > 0 else v[1:]
        else:
            v = re.sub(r"\s+#.*$", "", v).strip()
        if k.startswith(("sweep.", "ablate.")):
            continue
        if k == "include":
            inc = v if v.startswith("/") else os.path.join(os.path.dirname(path), v)
            conf_read(inc, into, depth + 1)
        else:
            into[k] = v


def num(cfg, table, key):
    v = cfg.get(key, table.get(key, ("", "0", ""))[1])
    d = parse_number(v)
    if d is None and v.lower() in BOOL:
        d = BOOL[v.lower()]
    return d if d is not None else float(parse_number(table[key][1]) or 0)


def flops_per_step(cfg, table):
    """model/gpt2.c gpt2_flops_per_token (6N + 12 L T C, N without wpe and with the real
    vocabulary) for the GPT-2 tensors, times the tokens of one optimizer step. Variant tensors
    (a few per head) are left out."""
    L, C, V = num(cfg, table, "n_layer"), num(cfg, table, "n_embd"), num(cfg, table, "vocab_size")
    T, B = num(cfg, table, "seq_len"), num(cfg, table, "batch_size")
    A = num(cfg, table, "grad_accum")
    per_layer = 12 * C * C + 13 * C if num(cfg, table, "mlp") else 4 * C * C + 6 * C
    n = V * C + L * per_layer + 2 * C
    return (6 * n + 12 * L * T * C) * B * T * A


def measured(path):
    """(median step_ms, median mfu) of a metrics.jsonl(.gz), or None."""
    if not os.path.isfile(path):
        return None
    ms, mfu = [], []
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt") as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if "train_loss" in r and isinstance(r.get("step_ms"), (int, float)):
                    ms.append(r["step_ms"])
                    if isinstance(r.get("mfu"), (int, float)):
                        mfu.append(r["mfu"])
    except (OSError, EOFError):
        return None
    if not ms:
        return None
    return statistics.median_low(ms), (statistics.median_low(mfu) if mfu else None)


PEAKS = {}


def peak_flops(bench, precision, threads):
    """(FLOP/s, how) of the matmul peak for the run's precision and threads, or (None, why)."""
    env = os.environ.get("ATTNLAB_PEAK_GFLOPS")
    if env:
        d = parse_number(env)
        if d is None or d <= 0:
            die("ATTNLAB_PEAK_GFLOPS = '%s' is not a positive number" % env)
        return d * 1e9, "ATTNLAB_PEAK_GFLOPS"
    key = (precision, threads)
    if key in PEAKS:
        return PEAKS[key]
    res = (None, "no %s to measure the matmul peak" % bench)
    if bench and os.access(bench, os.X_OK):
        env = dict(os.environ)
        if threads > 0:
            env["OMP_NUM_THREADS"] = str(threads)
        kinds = ["bf16-peak", "sgemm-peak"] if precision in ("bf16", "auto") else ["sgemm-peak"]
        for kind in kinds:
            try:
                out = subprocess.run([bench, kind], capture_output=True, text=True, env=env,
                                     timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                continue
            m = re.search(r"peak: ([0-9.]+) GFLOP/s", out.stdout)
            if out.returncode == 0 and m:
                res = (float(m.group(1)) * 1e9, "./bench " + kind)
                break
    PEAKS[key] = res
    return res


def cmd_estimate(train, sweep, out, args):
    opts = {"--results": "", "--step-ms": "", "--threads": "", "--bench": ""}
    while args:
        if args[0] not in opts or len(args) < 2:
            die("ablate_plan.py estimate: bad option %s" % args[0])
        opts[args[0]] = args[1]
        args = args[2:]
    table = key_table(train)
    base = {}
    conf_read(sweep, base)
    runs = []
    for line in sys.stdin:
        line = line.rstrip("\n")
        if not line:
            continue
        part, left, name, sets = line.split("\t", 3)
        cfg = dict(base)
        for kv in sets.split(US):
            if "=" in kv:
                k, _, v = kv.partition("=")
                cfg[k] = v
        if opts["--threads"]:
            cfg["threads"] = opts["--threads"]
        m = measured(os.path.join(out, name, "metrics.jsonl"))
        if m is None and opts["--results"]:
            m = measured(os.path.join(opts["--results"], name, "metrics.jsonl.gz"))
        runs.append({"part": part, "left": left == "1", "cfg": cfg, "m": m,
                     "flops": flops_per_step(cfg, table)})
    step_ms = parse_number(opts["--step-ms"]) if opts["--step-ms"] else None
    scaled = [r["m"][0] / r["flops"] for r in runs if r["m"] and r["flops"] > 0]
    ms_per_flop = statistics.median(scaled) if scaled else None
    parts = {}
    for r in runs:
        p = parts.setdefault(r["part"], {"s": 0.0, "how": {}, "model": set()})
        if not r["left"]:
            continue
        steps = num(r["cfg"], table, "max_steps")
        if r["m"]:
            ms, how = r["m"][0], "from measured step_ms"
        elif step_ms is not None:
            ms, how = step_ms, "at ablate.step_ms = %s ms/step" % opts["--step-ms"]
        elif ms_per_flop is not None:
            ms = ms_per_flop * r["flops"]
            how = "scaled by FLOPs from %d measured run%s" % (len(scaled),
                                                             "" if len(scaled) == 1 else "s")
        else:
            thr = int(num(r["cfg"], table, "threads"))
            prec = r["cfg"].get("precision", table["precision"][1])
            peak, src = peak_flops(opts["--bench"], prec, thr)
            if peak is None:
                how = "unknown (%s, no ablate.step_ms)" % src
                p["how"][how] = p["how"].get(how, 0) + 1
                continue
            ms = r["flops"] / (peak * MFU_ASSUMED) * 1e3
            how = "from the step-time model"
            p["model"].add("%.3g GFLOP/step at %.1f GFLOP/s (%s, %s thread%s) x MFU %.1f = "
                           "%.0f ms/step" % (r["flops"] / 1e9, peak / 1e9, src,
                                             thr if thr > 0 else "all", "" if thr == 1 else "s",
                                             MFU_ASSUMED, ms))
        p["s"] += steps * ms / 1000.0
        p["how"][how] = p["how"].get(how, 0) + 1
    for k in sorted(parts, key=lambda x: int(x)):
        p = parts[k]
        how = ", ".join("%d %s" % (n, h) for h, n in p["how"].items()) or "nothing left"
        if p["model"]:
            how += "; model: " + "; ".join(sorted(p["model"]))
        print("%s\t%.1f\t%s" % (k, p["s"], how))


def main(argv):
    if len(argv) >= 3 and argv[0] == "values":
        cmd_values(argv[1], argv[2])
    elif len(argv) >= 4 and argv[0] == "estimate":
        cmd_estimate(argv[1], argv[2], argv[3], argv[4:])
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv[1:])
