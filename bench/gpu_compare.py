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
    "llama": ("configs/llama-small.toml", 32000, 8, 20),            # the same size, Llama's way (GQA 12/4, SwiGLU)
}
# dense bf16 tensor-core peaks, FLOP/s (DESIGN §5; A100 from its data sheet)
PEAKS = {"H100": 989e12, "H200": 989e12, "A100": 312e12}
RUNS = ("dtrain", "eager", "compile", "profile")  # profile: dtrain again, timing each kernel family


def gpu_peak(name):
    for k, v in PEAKS.items():
        if k in name:
            return k, v
    return None, None


def attempt(cmd, env, timeout, what):
    """run_json, but a failure or timeout becomes {"error": ...} so that the other rows still run."""
    try:
        return run_json(cmd, env, timeout, what)
    except SystemExit as e:
        return {"error": str(e)[-600:]}


def print_preset(name, preset, batch, model, fpt, results):
    gpu_name = next((r.get("device", "") for _, r in results if "device" in r), "")
    _, peak = gpu_peak(gpu_name)
    print(f"\n== {name}: {preset}, batch {batch} x seq {model['seq_len']}, bf16, {results[0][1].get('params')} "
          f"parameters, {fpt / 1e9:.2f} GFLOP/token; GPU {gpu_name}, peak {peak / 1e12 if peak else float('nan'):.0f} "
          "TFLOP/s")
    print(f"{'run':<15}{'tokens/s':>12}{'step ms':>10}{'MFU':>8}{'peak GPU MiB':>14}{'dtrain/this':>13}")
    d = results[0][1]
    rows = []
    for who, r in results:
        if "error" in r:
            print(f"{who:<15}  failed: {r['error'].splitlines()[0][:200] if r['error'] else '?'}")
            rows.append({"preset": name, "run": who, "error": r["error"]})
            continue
        mfu = r["tokens_per_s"] * fpt / peak if peak else float("nan")
        ratio = d["tokens_per_s"] / r["tokens_per_s"] if "tokens_per_s" in d else float("nan")
        print(f"{who:<15}{r['tokens_per_s']:>12.0f}{r['step_ms']:>10.1f}{100 * mfu:>7.1f}%"
              f"{r.get('peak_device_mb', 0):>14.0f}{ratio:>13.2f}")
        rows.append({"preset": name, "run": who, "mfu": mfu, "dtrain_over_this": ratio, **r})
    return rows


def print_profile(prof, d):
    """dtrain's device time per kernel family and step (bench_train --profile)."""
    if "ops" not in prof:
        print(f"  profile: {prof.get('error', 'no ops (not on a GPU?)')[:200]}")
        return
    print(f"  device time per step by kernel family ({prof['profiled_ms']:.1f} ms profiled; the step without "
          f"profiling {d.get('step_ms', float('nan')):.1f} ms):")
    calls = [o for o in prof["ops"] if "/" not in o["op"]]
    for o in calls[:12]:  # each call, then its parts (timed apart inside it)
        for p in [o] + [p for p in prof["ops"] if p["op"].startswith(o["op"] + "/")]:
            rate = f"{p['tflops']:7.1f} TFLOP/s" if p["tflops"] else ""
            name = p["op"] if p is o else "  " + p["op"].split("/", 1)[1]
            print(f"    {name:<26}{p['ms']:>9.2f} ms {100 * p['share']:>5.1f}% {p['calls']:>6} calls  {rate}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"), help="folder with bench_train")
    ap.add_argument("--presets", default="course,gpt2-small,llama")
    ap.add_argument("--runs", default="dtrain,eager,compile,profile",
                    help="which of dtrain, eager, compile, profile (dtrain's device time per kernel family)")
    ap.add_argument("--steps", type=int, default=0, help="timed steps (default: the preset's)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--python", default=sys.executable, help="the Python that has torch with CUDA")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile run")
    ap.add_argument("--timeout", type=int, default=600, help="seconds one run may take")
    ap.add_argument("--json", default="", help="also write the rows here")
    ap.add_argument("--variant", action="append", default=[], metavar="ENV=VALUE",
                    help="also run dtrain with this environment variable (e.g. DTRAIN_CUDA_BF16=convert), "
                         "profiled too when profile is among --runs")
    args = ap.parse_args(argv)
    runs = [r for r in args.runs.split(",") if r]
    if args.no_compile and "compile" in runs:
        runs.remove("compile")
    for r in runs:
        if r not in RUNS:
            sys.exit(f"gpu_compare: unknown run {r}: use {', '.join(RUNS)}")
    env = dict(os.environ)
    # each --variant ENV=VALUE with its environment
    variants = [(v, dict(env, **{v.partition("=")[0]: v.partition("=")[2]})) for v in args.variant]
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
        d = attempt(dcmd, env, args.timeout, f"dtrain {name}")
        if "model" not in d:
            print(f"\n== {name}: dtrain failed: {d.get('error', '?')}")
            rows.append({"preset": name, "run": "dtrain", **d})
            continue
        model = d["model"]
        fpt = flops_per_token(model)
        results = [("dtrain", d)]
        for v, venv in variants:
            results.append((f"dtrain {v}", attempt(dcmd, venv, args.timeout, f"dtrain {name} {v}")))
        for run in [r for r in runs if r in ("eager", "compile")]:
            tcmd = [args.python, os.path.join(HERE, "torch_reference_bench.py"), "--config-json", json.dumps(model),
                    "--batch", str(batch), "--steps", str(steps), "--warmup", str(args.warmup), "--precision", "bf16",
                    "--device", "cuda"] + (["--compile"] if run == "compile" else [])
            results.append(("torch.compile" if run == "compile" else "torch eager",
                            attempt(tcmd, env, args.timeout, f"torch {run} {name}")))
        rows += print_preset(name, preset, batch, model, fpt, results)
        if "profile" in runs:
            for label, venv, base in [("", env, d)] + [(v, venv, dict(results)[f"dtrain {v}"]) for v, venv in variants]:
                prof = attempt(dcmd + ["--profile"], venv, args.timeout, f"dtrain {name} --profile {label}")
                print(f"  dtrain {label}".rstrip() + ":")
                print_profile(prof, base)
                rows.append({"preset": name, "run": f"dtrain profile {label}".rstrip(), **prof})
        if args.json:  # after every preset: a run stopped later keeps what was measured
            with open(args.json, "w") as f:
                json.dump({"formula": FORMULA, "rows": rows}, f, indent=1)
    targets = {r["run"]: r for r in rows if r["preset"] == "gpt2-small" and "error" not in r}
    if "dtrain" in targets:
        comp = targets.get("torch.compile")
        print("\ntargets (gpt2-small): dtrain >= 1.0x torch.compile: " +
              (f"{targets['dtrain']['tokens_per_s'] / comp['tokens_per_s']:.2f}x" if comp else "not run") +
              f"; MFU >= 45%: {100 * targets['dtrain']['mfu']:.1f}%")
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
