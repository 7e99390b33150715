#!/usr/bin/python3
# Training-throughput benchmark of the PyTorch reference model (tests/python/reference_model.py;
# llama_reference.py for model.kind = llama, moe_reference.py for model.kind = moe, cnn_reference.py
# for model.kind = cnn on random images)
# on the CPU or a GPU (eager or torch.compile): the peer dtrain's bench compares against. Prints
# one JSON line.
# Usage: /usr/bin/python3 bench/torch_reference_bench.py --config-json '{"vocab_size": 12000, ...}'
#        --batch 64 --steps 5 --warmup 1 --threads 2 --precision f32|bf16 [--optimizer adamw|sgd]
#        [--device cuda] [--compile]
import argparse
import contextlib
import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))

import torch  # noqa: E402

from cnn_reference import ReferenceCNN  # noqa: E402
from llama_reference import ReferenceLlama  # noqa: E402
from moe_reference import ReferenceMoE  # noqa: E402
from reference_model import ReferenceLM  # noqa: E402


def loaded_blas():
    """Real paths of the BLAS libraries mapped into this process (Debian's torch links the
    libblas.so.3 alternative: netlib reference BLAS, OpenBLAS, BLIS... decide f32 speed)."""
    libs = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                name = os.path.basename(path).lower()
                if path.startswith("/") and ("blas" in name or "blis" in name or "mkl" in name):
                    libs.add(os.path.realpath(path))
    except OSError:
        pass
    return sorted(libs)


def main(argv=None):
    ap = argparse.ArgumentParser(description="PyTorch reference LM training throughput (CPU)")
    ap.add_argument("--config-json", required=True, help="model config as JSON (docs/model.md keys)")
    ap.add_argument("--batch", type=int, default=64, help="samples per step")
    ap.add_argument("--steps", type=int, default=10, help="timed steps")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps before timing")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    ap.add_argument("--precision", choices=("f32", "bf16"), default="f32",
                    help="bf16 = torch.autocast('cpu', dtype=torch.bfloat16), f32 master weights")
    ap.add_argument("--lr", type=float, default=0.002, help="learning rate")
    ap.add_argument("--optimizer", choices=("adamw", "sgd"), default="adamw",
                    help="AdamW (default) or plain SGD (no momentum; dtrain's optim.name = sgd)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="cpu", help="cpu | cuda")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (GPU benchmark)")
    args = ap.parse_args(argv)
    if args.batch <= 0 or args.steps <= 0 or args.warmup < 0 or args.threads <= 0:
        ap.error("--batch, --steps and --threads must be positive and --warmup non-negative")
    try:
        config = json.loads(args.config_json)
    except json.JSONDecodeError as e:
        ap.error(f"--config-json is not valid JSON: {e}")

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    gpu = args.device.startswith("cuda")
    if gpu and not torch.cuda.is_available():
        ap.error("--device cuda but torch sees no GPU")
    kind = config.get("kind")
    reference = {"llama": ReferenceLlama, "moe": ReferenceMoE, "cnn": ReferenceCNN}.get(kind, ReferenceLM)
    try:
        model = reference(config).float().to(args.device)
    except ValueError as e:
        ap.error(str(e))
    model.train()  # dropout as configured, like a real training step
    B = args.batch
    if args.optimizer == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, **({"fused": True} if gpu else {}))
    total = args.warmup + args.steps
    if kind == "cnn":  # random normalised images [B, C·H·W] and one label each, as dtrain's bench draws them
        c = model.config
        V, T, pixels = c["classes"], 1, c["in_channels"] * c["height"] * c["width"]
        inputs = torch.randn(total, B, pixels, device=args.device)
    else:
        V, T = model.config["vocab_size"], model.config["seq_len"]
        inputs = torch.randint(0, V, (total, B, T), device=args.device)
    targets = torch.randint(0, V, (total, B, T), device=args.device)
    forward = torch.compile(model) if args.compile else model

    def autocast():
        if args.precision == "bf16":
            return torch.autocast("cuda" if gpu else "cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def step(i):
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            _, loss = forward(inputs[i], targets[i])
        loss.backward()
        optimizer.step()
        return loss.item()  # waits for the GPU: the step is over

    for i in range(args.warmup):
        step(i)
    if gpu:
        torch.cuda.reset_peak_memory_stats()
    times = []
    loss = float("nan")
    for i in range(args.warmup, total):
        t0 = time.perf_counter()
        loss = step(i)
        times.append(time.perf_counter() - t0)
    step_s = sum(times) / len(times)
    params = sum(p.numel() for p in model.parameters())
    print(json.dumps({
        "tokens_per_s": round(B * T / step_s, 1),
        "samples_per_s": round(B / step_s, 1),
        "step_ms": round(step_s * 1e3, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
        "loss": round(loss, 6),
        "min_step_ms": round(min(times) * 1e3, 3),
        "precision": args.precision,
        "optimizer": args.optimizer,
        "threads": args.threads,
        "batch": B,
        "seq_len": T,
        "steps": args.steps,
        "params": params,
        "torch": torch.__version__,
        "blas": loaded_blas(),
        "device": torch.cuda.get_device_name() if gpu else "cpu",
        "compile": args.compile,
        "peak_device_mb": round(torch.cuda.max_memory_allocated() / 2**20, 1) if gpu else 0.0,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
