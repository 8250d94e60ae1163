#!/usr/bin/python3
"""tests/ref/ref_mc.py: an independent float64 reference of multiple-choice scoring, for
tests/test_mc.c.

Reads an llm.c multiple-choice evaluation file (the format of karpathy/llm.c
dev/data/data_common.py write_evalfile: int32[256] header with magic 20240522, version 1, the
number of examples and the longest example's bytes; then per example the uint16 stream 65535,
bytes, index, label, number of completions, context length + tokens, per completion length +
tokens) with numpy, and an llm.c model file with tests/ref/ref_gpt2.py's loader and forward. Each
completion is scored as lm-evaluation-harness does: the input is (context + completion)[-(W + 1):]
without its last token, and the completion's log-likelihood is the sum of the log-softmax of the
logits at the completion's positions. Token ids are bytes (the byte tokenizer): a completion's
text is bytes(ids), and its ending's length is that count less one leading space.

Prints JSON: {"ll": [[...] per example], "acc": k, "acc_norm": k, "acc_norm_bytes": k, "n": n,
"truncated": t}, where the picks are numpy argmaxes of ll, ll / tokens and ll / ending bytes.

usage: /usr/bin/python3 tests/ref/ref_mc.py --model FILE.bin --eval FILE --window W
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_gpt2  # noqa: E402  (tests/ref/ref_gpt2.py)


def read_evalfile(path):
    raw = open(path, "rb").read()
    head = np.frombuffer(raw[:1024], dtype="<i4")
    if head[0] != 20240522 or head[1] != 1:
        sys.exit(f"{path}: not an llm.c evaluation file")
    words = np.frombuffer(raw[1024:], dtype="<u2").astype(np.int64)
    out, pos = [], 0
    for i in range(int(head[2])):
        assert words[pos] == 65535 and words[pos + 2] == i
        end = pos + words[pos + 1] // 2
        label, ncomp, q = int(words[pos + 3]), int(words[pos + 4]), pos + 5
        k = int(words[q])
        ctx = list(words[q + 1:q + 1 + k])
        q += 1 + k
        comps = []
        for _ in range(ncomp):
            k = int(words[q])
            comps.append(list(words[q + 1:q + 1 + k]))
            q += 1 + k
        assert q == end
        out.append((ctx, comps, label))
        pos = end
    return out


def log_softmax(x):
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="llm.c model file")
    ap.add_argument("--eval", required=True, help="llm.c evaluation file")
    ap.add_argument("--window", type=int, required=True)
    a = ap.parse_args()
    m = ref_gpt2.load_llmc(a.model)
    W = a.window
    res = {"ll": [], "acc": 0, "acc_norm": 0, "acc_norm_bytes": 0, "truncated": 0}
    for ctx, comps, label in read_evalfile(a.eval):
        lls, cut = [], False
        for comp in comps:
            seq = ctx + comp
            kept = seq[-(W + 1):]
            cut = cut or len(kept) < len(seq)
            inp = np.array(kept[:-1], dtype=np.int64)[None]
            lp = log_softmax(ref_gpt2.forward_logits(m, inp))[0]
            n = len(comp)
            first = len(kept) - 1 - n  # the position that predicts the completion's first token
            lls.append(float(sum(lp[first + j, comp[j]] for j in range(n))))
        ll = np.array(lls)
        ntok = np.array([len(c) for c in comps], dtype=np.float64)
        nbytes = np.array([len(c) - (1 if c[0] == 32 else 0) for c in comps], dtype=np.float64)
        res["acc"] += int(np.argmax(ll) == label)
        res["acc_norm"] += int(np.argmax(ll / ntok) == label)
        res["acc_norm_bytes"] += int(np.argmax(ll / nbytes) == label)
        res["truncated"] += int(cut)
        res["ll"].append(lls)
    res["n"] = len(res["ll"])
    print(json.dumps(res))


if __name__ == "__main__":
    main()
