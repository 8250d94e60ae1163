#!/usr/bin/python3
"""scripts/unigram_entropy.py TRAIN_SHARD [VAL_SHARD]: the unigram entropy (nats) of the tokens
in llm.c shards, and, given a validation shard, the cross-entropy of the unigram model fitted on
the training shard (add-one smoothed over the tokens seen in either shard): the loss a model
that ignores context would reach. Used by `make demo` to put the val loss in perspective."""
import sys

import syspython  # scripts/syspython.py: re-run under /usr/bin/python3 when numpy is missing

syspython.need("unigram_entropy.py", "numpy")
import numpy as np  # noqa: E402


def read_shard(path):
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(1024), dtype=np.int32)
        if header.size != 256 or header[0] != 20240520 or header[1] != 1:
            sys.exit(f"{path}: not an llm.c shard")
        tokens = np.frombuffer(f.read(), dtype=np.uint16)
    if tokens.size != header[2]:
        sys.exit(f"{path}: header says {header[2]} tokens, file has {tokens.size}")
    return tokens


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    train = read_shard(sys.argv[1])
    counts = np.bincount(train, minlength=65536).astype(np.float64)
    p = counts[counts > 0] / counts.sum()
    print(f"unigram entropy of {sys.argv[1]}: {-(p * np.log(p)).sum():.4f} nats")
    if len(sys.argv) == 3:
        val = read_shard(sys.argv[2])
        seen = (counts > 0) | (np.bincount(val, minlength=65536) > 0)
        q = (counts + 1.0) * seen
        q /= q.sum()
        ce = -np.log(q[val]).mean()
        print(f"unigram cross-entropy on {sys.argv[2]}: {ce:.4f} nats")


if __name__ == "__main__":
    main()
