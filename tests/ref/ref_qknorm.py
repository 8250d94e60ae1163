#!/usr/bin/python3
"""tests/ref/ref_qknorm.py: an independent float64 numpy reference of qk-norm (the model key qk_norm)
in front of an attention layer, for tests/test_qknorm_layer.c (float and double builds).

qk-layernorm as Wortsman et al. 2023 ("Small-scale proxies for large-scale Transformer training
instabilities", arXiv 2309.14322, Sec. 3.1.1) apply it: every head's query and key vector x (its
hs channels) becomes
    layernorm: g * (x - mean(x)) / sqrt(var(x) + 1e-6)     (var the biased variance)
    rmsnorm:   g * x / sqrt(mean(x^2) + 1e-6)
with g the layer's gain (hs entries) for q, another for k, shared by the heads; no bias. Values
are unchanged. The normalised q, k then go through the attention layer exactly as without qk-norm:
the position encoding (RoPE / xPos rotate the normalised vectors), the 1/sqrt(hs) scale, the row
map or the layer-level variant, all from tests/ref/ref_layers.py.

usage: /usr/bin/python3 tests/ref/ref_qknorm.py DIR
  DIR/cases.jsonl: one JSON object per case, the fields of ref_layers.py's cases plus "kind"
  (layernorm | rmsnorm); inputs DIR/<id>.x.npy, <id>.qkv.npy (the projection's raw q, k, v),
  <id>.gq.npy, <id>.gk.npy (hs), and as ref_layers.py <id>.rowp.npy, <id>.t.<name>.npy,
  <id>.fire.npy. Writes <id>.ref_qkvn.npy (the normalised qkv), <id>.ref_out.npy and
  <id>.ref_att.npy, float32, or float64 for a case with "f64": 1.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_layers  # noqa: E402

EPS = 1e-6


def qknorm(qkv, gq, gk, NH, kind):
    """qkv (B, T, 3C) -> the same with q and k normalised per head."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    hs = C // NH
    out = qkv.copy()
    for part, g in ((0, gq), (1, gk)):
        x = qkv[..., part * C:(part + 1) * C].reshape(B, T, NH, hs)
        if kind == "layernorm":
            mu = x.mean(-1, keepdims=True)
            var = ((x - mu) ** 2).mean(-1, keepdims=True)
            y = (x - mu) / np.sqrt(var + EPS)
        elif kind == "rmsnorm":
            y = x / np.sqrt((x ** 2).mean(-1, keepdims=True) + EPS)
        else:
            raise ref_layers.RefError(f"unknown qk-norm kind '{kind}'")
        out[..., part * C:(part + 1) * C] = (y * g).reshape(B, T, C)
    return out


def load(path):
    return np.load(path).astype(np.float64)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    n = 0
    with open(os.path.join(d, "cases.jsonl")) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            case = json.loads(line)
            pre = os.path.join(d, case["id"])
            qkvn = qknorm(load(pre + ".qkv.npy"), load(pre + ".gq.npy"), load(pre + ".gk.npy"),
                          case["NH"], case["kind"])
            rowp = load(pre + ".rowp.npy") if case.get("P", 0) > 0 else np.zeros((case["NH"], 0))
            tensors = {nm: load(f"{pre}.t.{nm}.npy") for nm in case.get("tensors", [])}
            fire = load(pre + ".fire.npy") if case["pos"] == "fire" else None
            try:
                out, att = ref_layers.layer_forward(case, load(pre + ".x.npy"), qkvn, rowp,
                                                    tensors, fire)
            except (ref_layers.RefError, KeyError) as e:
                sys.exit(f"cases.jsonl:{lineno} ({case['id']}, {case['variant']}): {e}")
            dt = np.float64 if case.get("f64") else np.float32
            np.save(pre + ".ref_qkvn.npy", qkvn.astype(dt))
            np.save(pre + ".ref_out.npy", out.astype(dt))
            np.save(pre + ".ref_att.npy", att.astype(dt))
            n += 1
    print(f"ref_qknorm: {n} cases")


if __name__ == "__main__":
    main()
