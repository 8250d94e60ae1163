#!/usr/bin/python3
"""scripts/ref_tokens_py.py: reference GPT-2 ids with the algorithm of OpenAI's encoder.py.

    /usr/bin/python3 scripts/ref_tokens_py.py > tests/fixtures/tokenizer_ref_py.txt

Reads the inputs of tests/fixtures/tokenizer_ref.txt (made by scripts/ref_tokens.mjs) and
encodes each with the Python `regex` module (Debian python3-regex) for pre-tokenization, the merge
ranks of data_cache/gpt2/vocab.bpe and the ids of data_cache/gpt2/encoder.json, exactly as
encoder.py does. Python's \\s includes U+0085 and excludes U+FEFF, unlike the JavaScript regex of
js-tiktoken; this fixture pins the tokenizer's default (Python) convention. Same line format as
tokenizer_ref.txt.
"""
import json
import os
import sys

import regex

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
PAT = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
EOT = "<|endoftext|>"


def byte_alphabet():
    """GPT-2's reversible byte -> printable character map."""
    keep = [b for b in range(256) if ord("!") <= b <= ord("~") or 0xA1 <= b <= 0xAC or 0xAE <= b]
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def main():
    gdir = os.path.join(ROOT, "data_cache", "gpt2")
    with open(os.path.join(gdir, "encoder.json"), encoding="utf-8") as f:
        encoder = json.load(f)
    with open(os.path.join(gdir, "vocab.bpe"), encoding="utf-8") as f:
        lines = f.read().split("\n")[1:-1]
    ranks = {tuple(line.split()): i for i, line in enumerate(lines)}
    alphabet = byte_alphabet()
    cache = {}

    def bpe(piece):
        if piece in cache:
            return cache[piece]
        word = list(piece)
        while len(word) > 1:
            best = min(zip(word, word[1:]), key=lambda p: ranks.get(p, float("inf")))
            if best not in ranks:
                break
            merged, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and word[i] == best[0] and word[i + 1] == best[1]:
                    merged.append(word[i] + word[i + 1])
                    i += 2
                else:
                    merged.append(word[i])
                    i += 1
            word = merged
        cache[piece] = word
        return word

    def encode(text):
        ids = []
        for m in PAT.findall(text):
            ids += [encoder[t] for t in bpe("".join(alphabet[b] for b in m.encode("utf-8")))]
        return ids

    src = os.path.join(ROOT, "tests", "fixtures", "tokenizer_ref.txt")
    with open(src, encoding="utf-8") as f:
        for line in f:
            name, mode, hexs, _ = line.rstrip("\n").split("\t")
            text = bytes.fromhex(hexs).decode("utf-8")
            if mode == "special":
                ids = []
                for k, part in enumerate(text.split(EOT)):
                    if k:
                        ids.append(encoder[EOT])
                    ids += encode(part)
            else:
                ids = encode(text)
            sys.stdout.write("%s\t%s\t%s\t%s\n" % (name, mode, hexs, " ".join(map(str, ids))))


if __name__ == "__main__":
    main()
