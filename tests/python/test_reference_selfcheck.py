#!/usr/bin/python3
# Self-test of the PyTorch parity tooling: safetensors round trip, the reference model against
# torch's own nn.TransformerEncoder, and parity.py on dumps it must pass and dumps it must fail.
# Run: /usr/bin/python3 tests/python/test_reference_selfcheck.py  (exit 0 = all checks passed)
import json
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import safetensors_io  # noqa: E402
from reference_model import ReferenceLM, adamw_losses, sinusoidal_table  # noqa: E402

PARITY = os.path.join(HERE, "parity.py")
failed = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        failed.append(what)


# --------------------------------------------------------------------------------------------
def test_safetensors_roundtrip(tmp):
    g = torch.Generator().manual_seed(3)
    tensors = {
        "a.f32": torch.randn(3, 5, generator=g),
        "b.bf16": torch.randn(7, generator=g).to(torch.bfloat16),
        "c.i32": torch.randint(-1000, 1000, (2, 3, 4), generator=g, dtype=torch.int32),
        "d.scalar": torch.tensor([1.5]),
        "e.empty": torch.zeros(0, 4),
    }
    meta = {"dtrain.model": json.dumps({"dim": 8, "tied": True}), "lr": "0.002"}
    path = os.path.join(tmp, "rt.safetensors")
    safetensors_io.save(path, tensors, meta)
    back, meta2 = safetensors_io.load(path)
    check(set(back) == set(tensors), "safetensors: same tensor names after round trip")
    for k, t in tensors.items():
        b = back.get(k)
        check(b is not None and b.dtype == t.dtype and b.shape == t.shape and torch.equal(b, t),
              f"safetensors: {k} ({t.dtype}) round-trips bit-exactly")
    check(meta2 == meta, "safetensors: metadata round-trips")

    # Layout per the format: u64 LE header length (multiple of 8), JSON header, raw LE data.
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    check(n % 8 == 0, "safetensors: header length is a multiple of 8")
    hdr = json.loads(blob[8:8 + n])
    info = hdr["b.bf16"]
    raw = blob[8 + n + info["data_offsets"][0]: 8 + n + info["data_offsets"][1]]
    bits = [struct.unpack("<H", raw[i:i + 2])[0] for i in range(0, len(raw), 2)]
    expect = [(struct.unpack("<I", struct.pack("<f", float(x)))[0] >> 16) for x in tensors["b.bf16"]]
    check(info["dtype"] == "BF16" and bits == expect, "safetensors: BF16 stored as top 16 bits of f32")
    check(hdr["c.i32"]["dtype"] == "I32" and hdr["a.f32"]["dtype"] == "F32", "safetensors: dtype tags")

    # A hand-made file (header not produced by save) is read correctly.
    body = struct.pack("<3f", 1.0, -2.0, 0.5) + struct.pack("<2i", 7, -9)
    h = json.dumps({"x": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]},
                    "y": {"dtype": "I32", "shape": [1, 2], "data_offsets": [12, 20]}}).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    p2 = os.path.join(tmp, "hand.safetensors")
    with open(p2, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + body)
    t2, m2 = safetensors_io.load(p2)
    check(t2["x"].tolist() == [1.0, -2.0, 0.5] and t2["y"].tolist() == [[7, -9]] and m2 == {},
          "safetensors: hand-written file loads")
    with open(p2, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + body[:-4])
    try:
        safetensors_io.load(p2)
        check(False, "safetensors: truncated file is rejected")
    except ValueError:
        check(True, "safetensors: truncated file is rejected")


# --------------------------------------------------------------------------------------------
def test_against_torch_encoder():
    """ReferenceLM (dropout off) equals an nn.TransformerEncoder model with the same weights."""
    for norm in ("post", "pre"):
        for causal in (True, False):
            cfg = dict(vocab_size=37, seq_len=9, dim=16, heads=4, layers=2, ff_dim=24,
                       activation="gelu" if norm == "pre" else "relu", norm=norm,
                       positions="sinusoidal", final_norm=True, tied=False, head_bias=True,
                       dropout=0.0, causal=causal, ln_eps=1e-5)
            torch.manual_seed(5)
            ref = ReferenceLM(cfg).double().eval()
            act = F.relu if cfg["activation"] == "relu" else (lambda x: F.gelu(x, approximate="tanh"))
            layer = nn.TransformerEncoderLayer(16, 4, 24, dropout=0.0, activation=act, batch_first=True,
                                               norm_first=(norm == "pre"), layer_norm_eps=1e-5)
            enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).double().train()
            with torch.no_grad():
                for i, L in enumerate(enc.layers):
                    b = ref.blocks[i]
                    L.self_attn.in_proj_weight.copy_(b.attn.qkv.weight)
                    L.self_attn.in_proj_bias.copy_(b.attn.qkv.bias)
                    L.self_attn.out_proj.weight.copy_(b.attn.out.weight)
                    L.self_attn.out_proj.bias.copy_(b.attn.out.bias)
                    L.linear1.weight.copy_(b.ff.fc1.weight)
                    L.linear1.bias.copy_(b.ff.fc1.bias)
                    L.linear2.weight.copy_(b.ff.fc2.weight)
                    L.linear2.bias.copy_(b.ff.fc2.bias)
                    L.norm1.weight.copy_(b.norm1.weight + 0.1 * torch.randn(16, dtype=torch.float64))
                    L.norm1.bias.copy_(0.1 * torch.randn(16, dtype=torch.float64))
                    L.norm2.weight.copy_(1.0 + 0.1 * torch.randn(16, dtype=torch.float64))
                    L.norm2.bias.copy_(0.1 * torch.randn(16, dtype=torch.float64))
                    b.norm1.weight.copy_(L.norm1.weight)
                    b.norm1.bias.copy_(L.norm1.bias)
                    b.norm2.weight.copy_(L.norm2.weight)
                    b.norm2.bias.copy_(L.norm2.bias)
            x = torch.randint(0, 37, (3, 9))
            h = ref.embed.weight[x] + sinusoidal_table(9, 16).float().double()
            mask = torch.triu(torch.full((9, 9), float("-inf"), dtype=torch.float64), 1) if causal else None
            h = enc(h, mask=mask)
            want = F.linear(ref.norm_f(h), ref.head.weight, ref.head.bias)
            got, _ = ref(x)
            err = (got - want).abs().max().item()
            check(err < 1e-10, f"reference == nn.TransformerEncoder ({norm}, causal={causal}): "
                               f"max diff {err:.1e}")


def test_model_details():
    cfg = dict(vocab_size=11, seq_len=5, dim=8, heads=2, layers=1, ff_dim=6, tied=True,
               head_bias=False, positions="learned", final_norm=False)
    m = ReferenceLM(cfg)
    names = [n for n, _ in m.named_parameters()]
    check("head.weight" not in names and "head.bias" not in names and "pos.weight" in names
          and "norm_f.weight" not in names and "blocks.0.attn.qkv.weight" in names,
          "parameter names follow the config (tied, no head bias, learned positions, no final norm)")
    sd = {n: p.detach().clone() for n, p in m.named_parameters()}
    bad = dict(sd)
    bad["head.weight"] = torch.zeros(11, 8)
    for what, d in (("extra name", bad),
                    ("missing name", {k: v for k, v in sd.items() if k != "pos.weight"}),
                    ("wrong shape", {**sd, "pos.weight": torch.zeros(4, 8)})):
        try:
            m.load_weights(d)
            check(False, f"load_weights rejects {what}")
        except ValueError:
            check(True, f"load_weights rejects {what}")
    # Causality: changing a later token leaves earlier logits unchanged.
    m.eval()
    x = torch.randint(0, 11, (2, 5))
    y = x.clone()
    y[:, 3] = (y[:, 3] + 1) % 11
    a, _ = m(x)
    b, _ = m(y)
    check(torch.equal(a[:, :3], b[:, :3]) and not torch.equal(a[:, 3:], b[:, 3:]),
          "causal: logits at t < 3 do not depend on token 3")
    # Dropout is active in train mode and rescales by 1/(1-p).
    m2 = ReferenceLM({**cfg, "dropout": 0.5}).train()
    l1, _ = m2(x)
    l2, _ = m2(x)
    check(not torch.equal(l1, l2), "dropout is applied in train mode")
    m2.eval()
    check(torch.equal(m2(x)[0], m2(x)[0]), "dropout is off in eval mode")


# --------------------------------------------------------------------------------------------
def make_dump(folder, cfg, B, S, opt, seed):
    """Write a dump folder like `dtrain debug dump`, computed independently in float64."""
    os.makedirs(folder, exist_ok=True)
    torch.manual_seed(seed)
    m = ReferenceLM(cfg)  # f32 initial weights (as dtrain would export them)
    weights = {n: p.detach().clone() for n, p in m.named_parameters()}
    V, T = cfg["vocab_size"], cfg["seq_len"]
    inputs = torch.randint(0, V, (S, B, T), dtype=torch.int32)
    targets = torch.randint(0, V, (S, B, T), dtype=torch.int32)
    meta = {"dtrain.model": json.dumps(cfg)}
    meta.update({k: repr(v) for k, v in opt.items()})
    safetensors_io.save(os.path.join(folder, "weights.safetensors"), weights, meta)
    safetensors_io.save(os.path.join(folder, "batch.safetensors"), {"inputs": inputs, "targets": targets})

    md = ReferenceLM(cfg).double().eval()
    md.load_weights(weights)
    logits, loss = md(inputs[0], targets[0])
    loss.backward()
    out = {"logits": logits.detach().float(), "loss": loss.detach().float().reshape(1)}
    for n, p in md.named_parameters():
        out["grad." + n] = p.grad.float()
    md.load_weights(weights)
    losses = adamw_losses(md, inputs[:S], targets[:S], opt)
    out["losses"] = torch.tensor(losses, dtype=torch.float32)
    safetensors_io.save(os.path.join(folder, "dtrain.safetensors"), out)
    return out


def run_parity(folder, *extra):
    r = subprocess.run([sys.executable, PARITY, folder, *extra], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def test_parity(tmp):
    opt = {"lr": 0.002, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01, "steps": 4}
    configs = {
        "seed-like": dict(vocab_size=97, seq_len=12, dim=32, heads=4, layers=2, ff_dim=64,
                          activation="relu", norm="post", positions="sinusoidal", final_norm=True,
                          tied=False, head_bias=True, dropout=0.1, causal=True, ln_eps=1e-5),
        "gpt-like": dict(vocab_size=64, seq_len=10, dim=24, heads=3, layers=3, ff_dim=48,
                         activation="gelu", norm="pre", positions="learned", final_norm=False,
                         tied=True, head_bias=False, dropout=0.0, causal=False, ln_eps=1e-6),
        "tied+bias": dict(vocab_size=50, seq_len=8, dim=16, heads=2, layers=1, ff_dim=40,
                          activation="relu", norm="pre", positions="sinusoidal", final_norm=True,
                          tied=True, head_bias=True, dropout=0.2, causal=True, ln_eps=1e-5),
    }
    for i, (label, cfg) in enumerate(configs.items()):
        d = os.path.join(tmp, label)
        make_dump(d, cfg, B=4, S=opt["steps"], opt=opt, seed=10 + i)
        rc, text = run_parity(d)
        check(rc == 0 and text.strip().endswith("PARITY OK"),
              f"parity.py passes on an independent float64 dump ({label})")
        if rc != 0:
            print(text)

    # Perturbations that must fail, each naming the offender.
    base = os.path.join(tmp, "seed-like")
    got, _ = safetensors_io.load(os.path.join(base, "dtrain.safetensors"))

    def variant(name, edit, expect):
        d = os.path.join(tmp, "bad-" + name)
        os.makedirs(d, exist_ok=True)
        for f in ("weights.safetensors", "batch.safetensors"):
            with open(os.path.join(base, f), "rb") as src, open(os.path.join(d, f), "wb") as dst:
                dst.write(src.read())
        t = {k: v.clone() for k, v in got.items()}
        edit(t)
        safetensors_io.save(os.path.join(d, "dtrain.safetensors"), t)
        rc, text = run_parity(d)
        last = text.strip().splitlines()[-1] if text.strip() else ""
        check(rc == 1 and last.startswith("PARITY FAIL") and expect in last,
              f"parity.py fails on {name}: {last!r}")

    def perturb_grad(t):
        g = t["grad.blocks.1.ff.fc1.weight"]
        g.view(-1)[7] += 1e-3 * g.abs().max()  # relative error 1e-3 > 1e-4
    variant("perturbed gradient", perturb_grad, "grad.blocks.1.ff.fc1.weight")

    def perturb_loss(t):
        t["losses"][2] += 5e-4
    variant("perturbed step loss", perturb_loss, "step 2")

    def perturb_logits(t):
        t["logits"][1, 3, 5] += 1e-2 * t["logits"].abs().max()
    variant("perturbed logits", perturb_logits, "logits")

    def drop_grad(t):
        del t["grad.head.bias"]
    variant("missing gradient", drop_grad, "grad.head.bias")

    def nan_grad(t):
        t["grad.embed.weight"][0, 0] = float("nan")
    variant("NaN gradient", nan_grad, "grad.embed.weight")

    rc, text = run_parity(os.path.join(tmp, "no-such-dir"))
    check(rc == 1 and "PARITY FAIL" in text and "not found" in text, "parity.py fails on a missing folder")

    # A looser tolerance lets the perturbed gradient through; a tighter one than float32 allows
    # catches the honest float64-vs-float32 difference (the comparison is not vacuous).
    rc, _ = run_parity(os.path.join(tmp, "bad-perturbed gradient"), "--rtol", "1e-2")
    check(rc == 0, "parity.py --rtol 1e-2 accepts a 1e-3 gradient perturbation")
    rc, _ = run_parity(base, "--rtol", "1e-12", "--loss-tol", "1e-12")
    check(rc == 1, "parity.py --rtol 1e-12 rejects float32 rounding differences")


def main():
    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory(prefix="dtrain-parity-selfcheck-") as tmp:
        test_safetensors_roundtrip(tmp)
        test_model_details()
        test_against_torch_encoder()
        test_parity(tmp)
    if failed:
        print(f"SELFCHECK FAIL: {len(failed)} check(s) failed: {failed[0]}")
        return 1
    print("SELFCHECK OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
