#!/usr/bin/env python3
# `dtrain plan` against published results (docs/planning.md): Narayanan et al. 2021, Table 1 (GPT
# models of 1.7B to 1T parameters on 32 to 3072 A100s: achieved teraFLOP/s per GPU, counted with their
# Eq. 3), planned on configs/hardware/a100.toml with each row's layout (micro-batch and interleaving
# from Megatron-LM's examples/sc21/run_table_1.sh); and Korthikanti et al. 2022, Table 2 (activation
# memory per layer of the 22B model, 5 ways), from the planner's own account of a layer.
# usage: bench/plan_published.py [BIN_DIR]   (prints two markdown tables)
import json, os, subprocess, sys, tempfile

BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "build", "bin")
GPT = """[model]
vocab_size = 51200
seq_len = 2048
activation = "gelu"
norm = "pre"
positions = "learned"
tied = false
dropout = 0.0
[train]
precision = "bf16"
"""


def plan(cfg, sets, world, mesh, hardware="a100"):
    args = [os.path.join(BIN, "dtrain"), "plan", "--config", cfg, "--hardware", hardware, "--world", str(world),
            "--mesh", mesh, "--json"]
    for s in sets:
        args += ["--set", s]
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode not in (0, 1) or not out.stdout.strip():
        sys.exit(f"dtrain plan failed: {' '.join(args)}\n{out.stderr}")
    return json.loads(out.stdout)


# (params B, heads, hidden, layers, tp, pp, gpus, batch, published TFLOP/s per GPU, micro-batch, virtual stages)
NARAYANAN = [
    (1.7, 24, 2304, 24, 1, 1, 32, 512, 137, 16, 1), (3.6, 32, 3072, 30, 2, 1, 64, 512, 138, 16, 1),
    (7.5, 32, 4096, 36, 4, 1, 128, 512, 142, 16, 1), (18.4, 48, 6144, 40, 8, 1, 256, 1024, 135, 8, 1),
    (39.1, 64, 8192, 48, 8, 2, 512, 1536, 138, 4, 1), (76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140, 2, 3),
    (145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148, 2, 2), (310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155, 1, 2),
    (529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163, 1, 3), (1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163, 1, 1),
]


def narayanan(cfg):
    print("| model | layout (t × p × d, micro-batch, schedule) | memory, worst rank | step s | TFLOP/s per GPU | published | error |")
    print("|---|---|---|---|---|---|---|")
    errors = []
    for params, a, h, l, t, p, n, B, published, mbs, v in NARAYANAN:
        d = n // (t * p)
        # a pipeline's micro-batches are its pass's (train.batch_size = its whole share, parallel.microbatches
        # of mbs each); without one, micro-steps of mbs accumulate
        m = B // d // mbs
        sets = [f"model.dim={h}", f"model.heads={a}", f"model.layers={l}", f"model.ff_dim={4 * h}",
                f"train.global_batch={B}", f"train.batch_size={B // d if p > 1 else mbs}"]
        mesh = f"tp={t},dp_replicate={d},recompute=full" + (f",sp=1" if t > 1 else "")
        if p > 1:
            mesh += f",pp={p},m={m},v={v},schedule={'interleaved-1f1b' if v > 1 else '1f1b'}"
        r = plan(cfg, sets, n, mesh)
        s, V = 2048, 51200
        flops = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))  # their Eq. 3 (with recompute)
        if "refused" in r:
            print(f"| {params}B | {mesh} | refused: {r['refused']} | | | {published} | |")
            continue
        tflops = flops / r["step_s"] / n / 1e12
        err = tflops / published - 1
        errors.append(abs(err))
        print(f"| {params}B | t {t} × p {p} × d {d}, mb {mbs}, {'v ' + str(v) if v > 1 else '1f1b' if p > 1 else 'no pipeline'} "
              f"| {r['need_bytes'] / 2**30:.1f} GiB{'' if r['fits'] else ' (does not fit)'} | {r['step_s']:.2f} "
              f"| {tflops:.0f} | {published} | {err * 100:+.0f}% |")
    within = sum(e <= 0.15 for e in errors)
    print(f"\n{within} of {len(errors)} rows within 15%; mean |error| {100 * sum(errors) / len(errors):.0f}%")


def korthikanti(cfg):
    # 22B: a 64, h 6144, s 2048, b (micro-batch) 4, t 8; one layer's activations: the planned block of a
    # model of 2 layers less that of 1 (the rest — embedding, head, loss — is the same in both)
    s, h, a, b, t = 2048, 6144, 64, 4, 8
    base = [f"model.dim={h}", f"model.heads={a}", f"model.ff_dim={4 * h}", f"train.batch_size={b}",
            f"train.global_batch={b}"]
    # (name, t, mesh extra, Korthikanti's bytes: 16-bit activations with dropout masks, the same
    # accounting for dtrain's f32 activations without dropout: no masks, no dropout outputs)
    q = s * b * h
    # dtrain's blocks keep fc1's output and make GELU's (fc2's input) again in backward: 4h floats a row
    # (16 of their sbh per layer, over t) fewer than the formula's; the last column takes that off
    cases = [("none (t = 1)", 1, "", q * (34 + 5 * a * s / h), q * (64 + 4 * a * s / h), 16 * q),
             ("tensor parallel", t, "", q * (10 + 24 / t + 5 * a * s / (h * t)), q * (16 + 48 / t + 4 * a * s / (h * t)), 16 * q / t),
             ("tensor + sequence parallel", t, ",sp=1", q * (34 / t + 5 * a * s / (h * t)), q * (64 / t + 4 * a * s / (h * t)), 16 * q / t),
             ("tensor parallel + selective recompute", t, ",recompute=selective", q * (10 + 24 / t), q * (16 + 48 / t), 16 * q / t),
             ("tensor + sequence parallel + selective", t, ",sp=1,recompute=selective", q * 34 / t, q * 64 / t, 16 * q / t),
             ("full recompute (with sequence parallel)", t, ",sp=1,recompute=full", q * 2, q * 4 / t, 0)]
    print("| configuration | Korthikanti (16-bit, dropout masks) | the same for f32, no dropout | dtrain planned "
          "| / Korthikanti | / f32 form | / f32 form, GELU remade |")
    print("|---|---|---|---|---|---|---|")
    for name, tp, extra, formula, f32, gelu in cases:
        mesh = f"tp={tp}{extra}"
        one = plan(cfg, base + ["model.layers=1"], tp, mesh)
        two = plan(cfg, base + ["model.layers=2"], tp, mesh)
        per_layer = two["memory"]["activation_bytes"] - one["memory"]["activation_bytes"]
        print(f"| {name} | {formula / 2**20:.0f} MiB | {f32 / 2**20:.0f} MiB | {per_layer / 2**20:.0f} MiB "
              f"| {per_layer / formula:.2f} | {per_layer / f32:.2f} | {per_layer / (f32 - gelu):.3f} |")


with tempfile.TemporaryDirectory() as tmp:
    cfg = os.path.join(tmp, "gpt.toml")
    open(cfg, "w").write(GPT)
    narayanan(cfg)
    print()
    korthikanti(cfg)
