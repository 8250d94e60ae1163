#!/usr/bin/python3
"""scripts/torch_peer.py: the benchmark's PyTorch peer (scripts/bench): a nanoGPT-style GPT-2
(pre-LayerNorm blocks, fused QKV, tanh GELU, tied classifier over the vocabulary padded to a
multiple of 128, AdamW) trained on random tokens at attnlab's shapes, in fp32 or under
torch.autocast('cpu', dtype=torch.bfloat16). Prints "ms_per_step tokens_per_s" (medians over
the steps after the first two). Benchmark only: attnlab never runs Python in training.

usage: scripts/torch_peer.py --layers L --heads H --embd C --block T --batch B --seq T
                             --steps N --precision fp32|bf16 [--threads N]
"""
import argparse
import math
import statistics
import sys
import time

import syspython  # scripts/syspython.py: re-run under /usr/bin/python3 when torch is missing

syspython.need("torch_peer.py", "torch")
import torch  # noqa: E402
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c, nh, block):
        super().__init__()
        self.nh = nh
        self.ln1 = nn.LayerNorm(c)
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)
        self.ln2 = nn.LayerNorm(c)
        self.fc = nn.Linear(c, 4 * c)
        self.fcproj = nn.Linear(4 * c, c)
        self.register_buffer("mask", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q = q.view(B, T, self.nh, C // self.nh).transpose(1, 2)
        k = k.view(B, T, self.nh, C // self.nh).transpose(1, 2)
        v = v.view(B, T, self.nh, C // self.nh).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, nh, c, block, vocab):
        super().__init__()
        self.wte = nn.Embedding(vocab, c)
        self.wpe = nn.Embedding(block, c)
        self.blocks = nn.ModuleList([Block(c, nh, block) for _ in range(L)])
        self.lnf = nn.LayerNorm(c)

    def forward(self, idx, targets):
        T = idx.size(1)
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.blocks:
            x = b(x)
        logits = self.lnf(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))


def main():
    ap = argparse.ArgumentParser()
    for k in ("layers", "heads", "embd", "block", "batch", "seq", "steps"):
        ap.add_argument("--" + k, type=int, required=True)
    ap.add_argument("--precision", choices=("fp32", "bf16"), required=True)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    vocab = 50304  # 50257 padded to a multiple of 128, as attnlab does
    m = GPT(a.layers, a.heads, a.embd, a.block, vocab)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, weight_decay=0.1)
    x = torch.randint(0, 50257, (a.batch, a.seq))
    y = torch.randint(0, 50257, (a.batch, a.seq))
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            loss = m(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
    if not math.isfinite(loss.item()):
        sys.exit("torch_peer: non-finite loss")
    t = times[2:] if len(times) > 3 else times
    ms = statistics.median(t) * 1e3
    print(f"{ms:.1f} {a.batch * a.seq / (ms / 1e3):.0f}")


if __name__ == "__main__":
    main()
