#!/usr/bin/python3
"""tests/ref/ref_gpt2.py: an independent numpy GPT-2 forward, used as a reference for attnlab.

Reads an llm.c model file (magic 20240326, version 3) or a Hugging Face directory / file
(model.safetensors + config.json, names with or without the "transformer." prefix, F32/F16/BF16/F64),
and llm.c token shards. Prints the mean validation loss over the first N batches of B x T, read
the way attnlab's validation reads them: shards in sorted glob order, batch i of a shard covers
tokens [i*B*T, i*B*T + B*T + 1) (inputs the first B*T, targets the last B*T), a shard's tail that
cannot fill a batch is skipped, and after the last shard reading wraps to the first.

Everything is computed in float64 from the file's weights; nothing is shared with attnlab's C code.

usage: /usr/bin/python3 tests/ref/ref_gpt2.py --model PATH --data GLOB -B 4 -T 64 --batches 2
       /usr/bin/python3 tests/ref/ref_gpt2.py --npy-dir DIR...  (logits of any variant and position
       encoding, for tests/test_ref_model.c; the attention comes from tests/ref/ref_layers.py)
"""
import argparse
import glob
import json
import math
import os
import struct
import sys

import numpy as np

LLMC_MAGIC, SHARD_MAGIC = 20240326, 20240520


def load_llmc(path):
    with open(path, "rb") as f:
        head = np.frombuffer(f.read(1024), dtype="<i4")
        if head.size != 256 or head[0] != LLMC_MAGIC or head[1] != 3:
            sys.exit(f"{path}: not an llm.c version 3 model file")
        maxT, V, L, NH, C, Vp = (int(x) for x in head[2:8])
        data = np.frombuffer(f.read(), dtype="<f4")
    shapes = [("wte", (Vp, C)), ("wpe", (maxT, C)), ("ln1w", (L, C)), ("ln1b", (L, C)),
              ("qkvw", (L, 3 * C, C)), ("qkvb", (L, 3 * C)), ("attprojw", (L, C, C)),
              ("attprojb", (L, C)), ("ln2w", (L, C)), ("ln2b", (L, C)), ("fcw", (L, 4 * C, C)),
              ("fcb", (L, 4 * C)), ("fcprojw", (L, C, 4 * C)), ("fcprojb", (L, C)),
              ("lnfw", (C,)), ("lnfb", (C,))]
    p, off = {}, 0
    for name, shape in shapes:
        n = int(np.prod(shape))
        if off + n > data.size:
            sys.exit(f"{path}: truncated at tensor {name}")
        p[name] = data[off:off + n].reshape(shape).astype(np.float64)
        off += n
    if off != data.size:
        sys.exit(f"{path}: {data.size - off} extra floats after the 16 tensors")
    # llm.c stores Linear weights (out, in): convert to x @ W with W (in, out)
    layers = []
    for l in range(L):
        layers.append(dict(
            ln1w=p["ln1w"][l], ln1b=p["ln1b"][l], qkvw=p["qkvw"][l].T, qkvb=p["qkvb"][l],
            projw=p["attprojw"][l].T, projb=p["attprojb"][l], ln2w=p["ln2w"][l], ln2b=p["ln2b"][l],
            fcw=p["fcw"][l].T, fcb=p["fcb"][l], fcprojw=p["fcprojw"][l].T, fcprojb=p["fcprojb"][l]))
    return dict(V=V, NH=NH, C=C, wte=p["wte"][:V], wpe=p["wpe"], layers=layers,
                lnfw=p["lnfw"], lnfb=p["lnfb"])


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (hl,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + hl].decode("utf-8"))
    data = raw[8 + hl:]
    out = {}
    for name, d in header.items():
        if name == "__metadata__":
            continue
        b, e = d["data_offsets"]
        buf = data[b:e]
        if d["dtype"] == "F32":
            a = np.frombuffer(buf, dtype="<f4").astype(np.float64)
        elif d["dtype"] == "F16":
            a = np.frombuffer(buf, dtype="<f2").astype(np.float64)
        elif d["dtype"] == "BF16":
            a = (np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16).view("<f4")
            a = a.astype(np.float64)
        elif d["dtype"] == "F64":
            a = np.frombuffer(buf, dtype="<f8").copy()
        else:  # integer / boolean buffers (attention masks) are not parameters
            continue
        out[name[12:] if name.startswith("transformer.") else name] = a.reshape(d["shape"])
    return out, header.get("__metadata__", {})


def load_hf(path):
    d = path if os.path.isdir(path) else os.path.dirname(path)
    st = os.path.join(path, "model.safetensors") if os.path.isdir(path) else path
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    t, meta = read_safetensors(st)
    # what the reference cannot compute (it is plain GPT-2): a warning for each, as for attention
    def setting(key, plain):
        return str(cfg.get(key, meta.get(key, plain)))
    for key, plain, what in (("attnlab_attention", "softmax", "attention"),
                             ("attnlab_pos_encoding", "learned", "position encoding"),
                             ("attnlab_qk_norm", "0", "qk_norm"),
                             ("attnlab_residual", "standard", "residual"),
                             ("attnlab_value_residual", "0", "value_residual")):
        if setting(key, plain) != plain:
            print(f"warning: {what} {setting(key, plain)} is not {plain}; the reference computes "
                  f"{plain}", file=sys.stderr)
    L, NH = cfg["n_layer"], cfg["n_head"]
    layers = []
    for l in range(L):
        g = lambda k: t[f"h.{l}.{k}"]  # noqa: E731
        # Hugging Face Conv1D weights are already (in, out)
        layers.append(dict(
            ln1w=g("ln_1.weight"), ln1b=g("ln_1.bias"), qkvw=g("attn.c_attn.weight"),
            qkvb=g("attn.c_attn.bias"), projw=g("attn.c_proj.weight"), projb=g("attn.c_proj.bias"),
            ln2w=g("ln_2.weight"), ln2b=g("ln_2.bias"), fcw=g("mlp.c_fc.weight"),
            fcb=g("mlp.c_fc.bias"), fcprojw=g("mlp.c_proj.weight"), fcprojb=g("mlp.c_proj.bias")))
    V = cfg["vocab_size"]
    return dict(V=V, NH=NH, C=cfg["n_embd"], wte=t["wte.weight"][:V], wpe=t["wpe.weight"],
                layers=layers, lnfw=t["ln_f.weight"], lnfb=t["ln_f.bias"])


def layernorm(x, w, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * w + b


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def attention_softmax(h, qkv, B, T, C, NH):
    """Plain causal softmax attention of the (B, T, 3C) projections: (B, T, C) head outputs."""
    hs = C // NH
    q, k, v = np.split(qkv, 3, axis=-1)
    q = q.reshape(B, T, NH, hs).transpose(0, 2, 1, 3)
    k = k.reshape(B, T, NH, hs).transpose(0, 2, 1, 3)
    v = v.reshape(B, T, NH, hs).transpose(0, 2, 1, 3)
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hs)
    s = np.where(np.triu(np.ones((T, T), dtype=bool), 1), -np.inf, s)
    s = s - s.max(-1, keepdims=True)
    a = np.exp(s)
    a /= a.sum(-1, keepdims=True)
    return (a @ v).transpose(0, 2, 1, 3).reshape(B, T, C)


def depth_route(w, sources):
    """Softmax attention over depth with pseudo-query w (C,): sources are (B, T, C) arrays, the
    keys their RMSNorm (eps 1e-6, no gain), weights softmax_i(w . RMSNorm(v_i)) per position
    (Kimi Team, "Attention Residuals", arXiv 2603.15031: phi(q, k) = exp(q^T RMSNorm(k)))."""
    V = np.stack(sources)                                   # (n, B, T, C)
    K = V / np.sqrt((V ** 2).mean(-1, keepdims=True) + 1e-6)
    z = np.einsum("c,nbtc->nbt", w, K)
    a = np.exp(z - z.max(0, keepdims=True))
    a /= a.sum(0, keepdims=True)
    return np.einsum("nbt,nbtc->btc", a, V)


def forward_logits(m, inputs):
    """(B, T, V) logits of (B, T) inputs. m["pos"] (default learned): the learned position
    embedding is added only under learned; rope / alibi / none / fire act inside the attention
    (fire with each layer's own vector, m["attn"][l]["fire"]). With
    m["attn"] (a list per layer of dicts: case, rowp, tensors) each layer's attention comes from
    tests/ref/ref_layers.py (any registered variant); otherwise it is plain softmax.
    m["residual"] (default standard): attnres routes every sublayer's input (and ln_f's) over
    the embedding and the earlier sublayer outputs with pseudo-query row s of m["resid_query"];
    delta_attnres (Luo et al. 2026) adds a routed mix of those deltas (row s - 1) to the residual
    stream for sublayers 1 .. 2L-1. m["value_residual"] (ResFormer, Zhou et al. 2024): layer l >= 1
    attends with values lambda[l,0] V_l + lambda[l,1] V_0 (m["vres_lambda"], (L, 2)).
    m["qk_norm"] (layernorm | rmsnorm; qk-layernorm, Wortsman et al. 2023): every layer's q and k
    are normalised per head with the layer's gains m["qk_gain"][l] = (q gain, k gain) before the
    attention (tests/ref/ref_qknorm.py)."""
    B, T = inputs.shape
    C, NH = m["C"], m["NH"]
    pos = m.get("pos", "learned")
    mode = m.get("residual", "standard")
    Q = m.get("resid_query")
    x = m["wte"][inputs]
    if pos == "learned":
        x = x + m["wpe"][:T][None]
    outs = [x]  # the embedding, then every sublayer's output

    def sub_input(s, stream):  # the input of sublayer s (2 per block), given the plain stream
        if mode == "attnres":
            return depth_route(Q[s], outs)
        if mode == "delta_attnres" and s >= 1:
            return stream + depth_route(Q[s - 1], outs)
        return stream

    v0 = None
    for li, ly in enumerate(m["layers"]):
        h = layernorm(sub_input(2 * li, x), ly["ln1w"], ly["ln1b"])
        qkv = h @ ly["qkvw"] + ly["qkvb"]
        if m.get("value_residual"):
            if li == 0:
                v0 = qkv[..., 2 * C:].copy()
            else:
                lam = m["vres_lambda"][li]
                qkv = np.concatenate([qkv[..., :2 * C], lam[0] * qkv[..., 2 * C:] + lam[1] * v0],
                                     -1)
        if m.get("qk_norm"):
            import ref_qknorm  # tests/ref/ref_qknorm.py, next to this file
            gq, gk = m["qk_gain"][li]
            qkv = ref_qknorm.qknorm(qkv, gq, gk, NH, m["qk_norm"])
        if "attn" in m:
            import ref_layers  # tests/ref/ref_layers.py, next to this file
            a = m["attn"][li]
            case = dict(a["case"], B=B, T=T, C=C, NH=NH, pos=pos, layer=li)
            y, _ = ref_layers.layer_forward(case, h, qkv, a["rowp"], a["tensors"], a.get("fire"))
        else:
            if pos != "learned":
                sys.exit(f"position encoding {pos} needs per-layer attention (--npy-dir)")
            y = attention_softmax(h, qkv, B, T, C, NH)
        f = y @ ly["projw"] + ly["projb"]
        x = x + f
        outs.append(f)
        if not ly.get("mlp", True):  # attention-only block (mlp = 0): x2 = x1
            continue
        h = layernorm(sub_input(2 * li + 1, x), ly["ln2w"], ly["ln2b"])
        f = gelu_tanh(h @ ly["fcw"] + ly["fcb"]) @ ly["fcprojw"] + ly["fcprojb"]
        x = x + f
        outs.append(f)
    if mode == "attnres":
        x = depth_route(Q[2 * len(m["layers"])], outs)
    x = layernorm(x, m["lnfw"], m["lnfb"])
    return x @ m["wte"].T  # (B, T, V): only the real vocabulary


def forward_loss(m, inputs, targets):
    """Mean cross-entropy of (B, T) inputs against targets."""
    logits = forward_logits(m, inputs)
    mx = logits.max(-1, keepdims=True)
    lse = np.log(np.exp(logits - mx).sum(-1)) + mx[..., 0]
    tl = np.take_along_axis(logits, targets[..., None], -1)[..., 0]
    return float((lse - tl).mean())


def load_npy_dir(d):
    """A model written as .npy files: DIR/model.json {L, NH, C, V, maxT, pos, layers: [{variant,
    hp, inner, inner_hp, T_train, P, tensors}], mlp}, DIR/<llm.c name>.npy for the 16 llm.c
    tensors in llm.c's shapes (Linear weights (out, in); with "mlp": 0 the blocks are
    attention-only and ln2*/fc* are absent), DIR/L<l>.rowp.npy (NH, P) and DIR/L<l>.t.<name>.npy
    per layer, DIR/L<l>.fire.npy (the layer's FIRE vector) under pos = fire; with "residual" (attnres | delta_attnres) DIR/resid.query.npy, with
    "value_residual": 1 DIR/value_residual.lambda.npy, with "qk_norm": 1 (and "qk_norm_kind")
    DIR/qk_norm.q_gain.npy and DIR/qk_norm.k_gain.npy (L, hs)."""
    with open(os.path.join(d, "model.json")) as f:
        cfg = json.load(f)
    L, NH, C, V = cfg["L"], cfg["NH"], cfg["C"], cfg["V"]
    mlp = bool(cfg.get("mlp", 1))
    mlp_names = ("ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb")
    p = {}
    for name in ("wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb") + (
            mlp_names if mlp else ()) + ("lnfw", "lnfb"):
        p[name] = np.load(os.path.join(d, name + ".npy")).astype(np.float64)
    layers, attn = [], []
    for l in range(L):
        ly = dict(ln1w=p["ln1w"][l], ln1b=p["ln1b"][l], qkvw=p["qkvw"][l].T, qkvb=p["qkvb"][l],
                  projw=p["attprojw"][l].T, projb=p["attprojb"][l], mlp=mlp)
        if mlp:
            ly.update(ln2w=p["ln2w"][l], ln2b=p["ln2b"][l], fcw=p["fcw"][l].T, fcb=p["fcb"][l],
                      fcprojw=p["fcprojw"][l].T, fcprojb=p["fcprojb"][l])
        layers.append(ly)
        la = cfg["layers"][l]
        pre = os.path.join(d, f"L{l}")
        rowp = (np.load(pre + ".rowp.npy").astype(np.float64) if la.get("P", 0) > 0
                else np.zeros((NH, 0)))
        tens = {nm: np.load(f"{pre}.t.{nm}.npy").astype(np.float64) for nm in la["tensors"]}
        fire = (np.load(pre + ".fire.npy").astype(np.float64) if cfg["pos"] == "fire" else None)
        attn.append(dict(case=la, rowp=rowp, tensors=tens, fire=fire))
    out = dict(V=V, NH=NH, C=C, wte=p["wte"][:V], wpe=p["wpe"], layers=layers, lnfw=p["lnfw"],
               lnfb=p["lnfb"], pos=cfg["pos"], attn=attn)
    out["residual"] = cfg.get("residual", "standard")
    if out["residual"] != "standard":
        out["resid_query"] = np.load(os.path.join(d, "resid.query.npy")).astype(np.float64)
    if cfg.get("value_residual"):
        out["value_residual"] = 1
        out["vres_lambda"] = np.load(os.path.join(d, "value_residual.lambda.npy")).astype(
            np.float64)
    if cfg.get("qk_norm"):
        out["qk_norm"] = cfg.get("qk_norm_kind", "layernorm")
        gq = np.load(os.path.join(d, "qk_norm.q_gain.npy")).astype(np.float64)
        gk = np.load(os.path.join(d, "qk_norm.k_gain.npy")).astype(np.float64)
        out["qk_gain"] = [(gq[l], gk[l]) for l in range(L)]
    return out


def read_shard(path):
    with open(path, "rb") as f:
        head = np.frombuffer(f.read(1024), dtype="<i4")
        if head.size != 256 or head[0] != SHARD_MAGIC or head[1] != 1:
            sys.exit(f"{path}: not an llm.c shard")
        toks = np.frombuffer(f.read(), dtype="<u2")
    if toks.size != head[2]:
        sys.exit(f"{path}: header says {head[2]} tokens, file holds {toks.size}")
    return toks.astype(np.int64)


def batches(pattern, B, T, n):
    files = sorted(glob.glob(pattern))
    if not files:
        sys.exit(f"{pattern}: no shard matches")
    shards = [read_shard(p) for p in files]
    bt = B * T
    if all((s.size - 1) // bt == 0 for s in shards):
        sys.exit(f"{pattern}: no shard holds one batch of {bt + 1} tokens")
    out = []
    while len(out) < n:
        for s in shards:
            for w in range((s.size - 1) // bt):
                if len(out) == n:
                    break
                chunk = s[w * bt:w * bt + bt + 1]
                out.append((chunk[:-1].reshape(B, T), chunk[1:].reshape(B, T)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--npy-dir", nargs="+", help="models as .npy files (see load_npy_dir), each "
                    "with tokens.npy (B, T): write ref_logits.npy (B, T, V) into each and exit")
    ap.add_argument("--model",
                    help="llm.c model file, or a Hugging Face directory / model.safetensors")
    ap.add_argument("--data", help="glob of llm.c shards")
    ap.add_argument("-B", type=int, default=4)
    ap.add_argument("-T", type=int, default=64)
    ap.add_argument("--batches", type=int, default=1)
    a = ap.parse_args()
    for d in a.npy_dir or []:
        m = load_npy_dir(d)
        toks = np.load(os.path.join(d, "tokens.npy")).astype(np.int64)
        if toks.ndim != 2 or toks.min() < 0 or toks.max() >= m["V"]:
            sys.exit(f"{d}/tokens.npy: expected (B, T) token ids below {m['V']}")
        np.save(os.path.join(d, "ref_logits.npy"), forward_logits(m, toks).astype(np.float32))
    if a.npy_dir:
        return
    if not a.model or not a.data:
        ap.error("--model and --data are required (or --npy-dir)")
    is_llmc = False
    if os.path.isfile(a.model):
        with open(a.model, "rb") as f:
            is_llmc = struct.unpack("<i", f.read(4))[0] == LLMC_MAGIC
    m = load_llmc(a.model) if is_llmc else load_hf(a.model)
    if a.T > m["wpe"].shape[0]:
        sys.exit(f"T={a.T} exceeds the model's {m['wpe'].shape[0]} positions")
    losses = []
    for inp, tgt in batches(a.data, a.B, a.T, a.batches):
        if inp.max() >= m["V"] or tgt.max() >= m["V"]:
            sys.exit(f"{a.data}: token id >= vocab_size {m['V']}")
        losses.append(forward_loss(m, inp, tgt))
    print(f"val_loss {np.mean(losses):.6f}")


if __name__ == "__main__":
    main()
