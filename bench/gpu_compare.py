#!/usr/bin/env python3
# dtrain vs PyTorch (eager and torch.compile) on this machine's GPU, side by side in one run: same
# model, batch, precision (bf16 compute, f32 master weights) and steps. Prints tokens/s, the ratios,
# MFU against the GPU's dense bf16 peak and peak GPU memory. Run through bench/gpu_compare.sh.
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from compare import FORMULA, flops_per_token, run_json  # noqa: E402

# name -> (preset, vocab for random tokens, batch, timed steps)
PRESETS = {
    "course": ("configs/seed-wikitext.toml", 33278, 512, 20),     # the course's model, WikiText-2 vocab
    "gpt2-small": ("configs/bench-gpt2-small.toml", 50304, 8, 20),  # 12 L, d 768, T 1024 (DESIGN §5)
}
# dense bf16 tensor-core peaks, FLOP/s (DESIGN §5; A100 from its data sheet)
PEAKS = {"H100": 989e12, "H200": 989e12, "A100": 312e12}


def gpu_peak(name):
    for k, v in PEAKS.items():
        if k in name:
            return k, v
    return None, None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"), help="folder with bench_train")
    ap.add_argument("--presets", default="course,gpt2-small")
    ap.add_argument("--steps", type=int, default=0, help="timed steps (default: the preset's)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--python", default=sys.executable, help="the Python that has torch with CUDA")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile run")
    args = ap.parse_args(argv)
    env = dict(os.environ)
    rows = []
    print("formula: " + FORMULA)
    for name in args.presets.split(","):
        if name not in PRESETS:
            sys.exit(f"gpu_compare: unknown preset {name}: use {', '.join(PRESETS)}")
        preset, vocab, batch, steps = PRESETS[name]
        steps = args.steps or steps
        dcmd = [os.path.join(args.bin, "bench_train"), "--config", os.path.join(ROOT, preset), "--vocab", str(vocab),
                "--batch", str(batch), "--precision", "bf16", "--device", "cuda", "--steps", str(steps),
                "--warmup", str(args.warmup), "--set", "train.device=cuda"]
        d = run_json(dcmd, env, 3600, f"dtrain {name}")
        model = d["model"]
        fpt = flops_per_token(model)
        results = [("dtrain", d)]
        for compiled in ([False] if args.no_compile else [False, True]):
            tcmd = [args.python, os.path.join(HERE, "torch_reference_bench.py"), "--config-json", json.dumps(model),
                    "--batch", str(batch), "--steps", str(steps), "--warmup", str(args.warmup), "--precision", "bf16",
                    "--device", "cuda"] + (["--compile"] if compiled else [])
            results.append(("torch.compile" if compiled else "torch eager", run_json(tcmd, env, 3600, f"torch {name}")))
        gpu_name = results[-1][1].get("device", "")
        kind, peak = gpu_peak(gpu_name)
        print(f"\n== {name}: {preset}, batch {batch} x seq {model['seq_len']}, bf16, {d['params']} parameters, "
              f"{fpt / 1e9:.2f} GFLOP/token; GPU {gpu_name}, peak {peak / 1e12 if peak else float('nan'):.0f} TFLOP/s")
        print(f"{'run':<15}{'tokens/s':>12}{'step ms':>10}{'MFU':>8}{'peak GPU MiB':>14}{'dtrain/this':>13}")
        for who, r in results:
            mfu = r["tokens_per_s"] * fpt / peak if peak else float("nan")
            ratio = d["tokens_per_s"] / r["tokens_per_s"]
            print(f"{who:<15}{r['tokens_per_s']:>12.0f}{r['step_ms']:>10.1f}{100 * mfu:>7.1f}%"
                  f"{r.get('peak_device_mb', 0):>14.0f}{ratio:>13.2f}")
            rows.append({"preset": name, "run": who, "mfu": mfu, **r})
    targets = [r for r in rows if r["preset"] == "gpt2-small"]
    if targets:
        dt = next(r for r in targets if r["run"] == "dtrain")
        comp = next((r for r in targets if r["run"] == "torch.compile"), None)
        print("\ntargets (gpt2-small): dtrain >= 1.0x torch.compile: " +
              (f"{dt['tokens_per_s'] / comp['tokens_per_s']:.2f}x" if comp else "not run") +
              f"; MFU >= 45%: {100 * dt['mfu']:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
