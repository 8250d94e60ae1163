#!/usr/bin/python3
"""tests/ref/ref_sinks.py: an independent numpy reference for ./probe sinks (tests/test_probe_sinks.c).

    ref_sinks.py --attnmap BIN --checkpoint PATH --shard FILE --docs N --prefix TS
                 --triggers CHARS --eps E --json FILE

Reads the first N documents (EOT-led, all of one length) of the llm.c shard FILE, gets every
document's attention maps from ./attnmap (a separate code path from ./probe's), and recomputes
from the papers' definitions, written here from their code:
  Gu et al. (sail-sg/Attention-Sink:pretrain/eval_sink_pretrain.py): the model on the first TS
  tokens; importance = (scores / arange(TS, 0, -1)).sum(-2) at column 0, with the weights
  renormalised a / (a.sum(-1) + 1e-8) (lit_gpt/inference/model_attn_sim_infer.py); rate =
  mean over (doc, layer, head) of importance > eps (raw: the same without renormalising).
  Guo et al. (GuoTianYu2000/Active-Dormant-Attention:BBM/probe_utils.py): per (layer, head),
  attn[:, :, 0][~isin(x, triggers)].mean() over the full documents.
Compares with the JSON line of ./probe sinks in FILE and exits 1 on a difference > 1e-5.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np


def read_shard(path):
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(256 * 4), dtype=np.int32)
        n = int(header[2])
        return np.frombuffer(f.read(), dtype=np.uint16)[:n]


def maps(attnmap, ckpt, tokens, tmp):
    tf = os.path.join(tmp, "tok.txt")
    with open(tf, "w") as f:
        f.write(" ".join(str(int(t)) for t in tokens))
    prefix = os.path.join(tmp, "m")
    subprocess.run([attnmap, "--checkpoint", ckpt, "--tokens", tf, "--out", prefix], check=True,
                   stdout=subprocess.DEVNULL)
    return np.load(prefix + ".npy").astype(np.float64)  # (L, H, T, T)


def main():
    ap = argparse.ArgumentParser()
    for k in ("attnmap", "checkpoint", "shard", "triggers", "json"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--docs", type=int, required=True)
    ap.add_argument("--prefix", type=int, required=True)
    ap.add_argument("--eps", type=float, required=True)
    a = ap.parse_args()
    tok = read_shard(a.shard)
    starts = np.flatnonzero(tok == 256)
    T = int(starts[1] - starts[0])
    docs = tok[: a.docs * T].reshape(a.docs, T)
    trig = np.array([ord(c) for c in a.triggers], dtype=np.int64)
    Ts = min(a.prefix, T)
    gu_raw, gu_ren, nt_raw, nt_ren, nt_n = [], [], None, None, None
    all_raw, all_ren, all_n = 0.0, 0.0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for x in docs:
            A = maps(a.attnmap, a.checkpoint, x[:Ts], tmp)
            ratios = np.arange(Ts, 0, -1)[None, None, None, :]
            ren = A / (A.sum(-1, keepdims=True) + 1e-8)
            gu_raw.append((A / ratios).sum(-2)[:, :, 0])
            gu_ren.append((ren / ratios).sum(-2)[:, :, 0])
            F = maps(a.attnmap, a.checkpoint, x, tmp)
            Fr = F / (F.sum(-1, keepdims=True) + 1e-8)
            keep = ~np.isin(x, trig)
            s_raw = F[:, :, keep, 0].sum(-1)
            s_ren = Fr[:, :, keep, 0].sum(-1)
            nt_raw = s_raw if nt_raw is None else nt_raw + s_raw
            nt_ren = s_ren if nt_ren is None else nt_ren + s_ren
            nt_n = keep.sum() if nt_n is None else nt_n + keep.sum()
            all_raw = all_raw + F[:, :, :, 0].sum(-1)
            all_ren = all_ren + Fr[:, :, :, 0].sum(-1)
            all_n += len(x)
    gu_raw, gu_ren = np.array(gu_raw), np.array(gu_ren)  # (docs, L, H)
    want = {"sink_rate_gu": float((gu_ren > a.eps).mean()),
            "sink_rate_gu_raw": float((gu_raw > a.eps).mean())}
    ntm_ren, ntm_raw = nt_ren / nt_n, nt_raw / nt_n
    want["nontrig_a0_max"] = float(ntm_ren.max())
    with open(a.json) as f:
        got = json.loads(f.read().strip().splitlines()[-1])
    bad = []
    for k, v in want.items():
        if abs(got[k] - v) > 1e-5:
            bad.append(f"{k}: probe {got[k]} vs reference {v}")
    L, H = ntm_ren.shape
    for h in got["heads"]:
        l, hh = h["layer"], h["head"]
        checks = {"gu_rate": (gu_ren[:, l, hh] > a.eps).mean(),
                  "gu_rate_raw": (gu_raw[:, l, hh] > a.eps).mean(),
                  "gu_alpha0": gu_ren[:, l, hh].mean(), "gu_alpha0_raw": gu_raw[:, l, hh].mean(),
                  "nontrig_a0": ntm_ren[l, hh], "nontrig_a0_raw": ntm_raw[l, hh],
                  "all_a0": all_ren[l, hh] / all_n, "all_a0_raw": all_raw[l, hh] / all_n}
        for k, v in checks.items():
            if abs(h[k] - float(v)) > 1e-5:
                bad.append(f"L{l}H{hh} {k}: probe {h[k]} vs reference {float(v)}")
    print(f"ref_sinks: {a.docs} docs, T {T}, prefix {Ts}, {L}x{H} heads: reference "
          + ", ".join(f"{k} {v:.6f}" for k, v in want.items()))
    if bad:
        print("ref_sinks: MISMATCH\n  " + "\n  ".join(bad))
        sys.exit(1)
    print("ref_sinks: ./probe sinks agrees with the reference")


if __name__ == "__main__":
    main()
