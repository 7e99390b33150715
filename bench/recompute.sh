#!/usr/bin/env bash
# Activation recompute (train.recompute), side by side in one run: per-layer activation memory
# (planned, and peak RSS) and step time for none, selective and full on the Transformer preset
# (configs/bench-large.toml) and the Llama preset (configs/bench-llama.toml), with ratios to none
# and the planned bytes beside what a block keeps by count. Per-layer figures are the growth from
# L/2 to 2L layers (one step each; L the preset's; RSS grows in the arena's 64 MiB chunks, so the
# wider span); step times and the whole run's peak RSS come from runs of L layers, the modes
# alternating over --rounds rounds: the fastest step of each mode (metrics.jsonl, the first step
# left out), the statistic least moved by a busy machine.
# usage: bench/recompute.sh [--bin DIR] [--batch N] [--steps N] [--rounds N] [--threads N] [--presets "large llama"] [--set key=value ...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/../build/bin batch=16 steps=6 rounds=2 threads=2 presets="large llama" sets=()
source "$here/lib.sh"
bench_options "--batch batch --steps steps --rounds rounds --threads threads --presets presets --set sets+" "$@"
bench_work
bench_data
modes="none selective full"
run() {  # $1 = name, $2 = preset, $3 = layers, $4 = steps, $5 = mode
  local cfg=$here/../configs/bench-$2.toml
  "$bin/dtrain" train --config "$cfg" --set data.dir="$work/data" --set data.stride=128 --set model.layers="$3" \
    --set train.batch_size="$batch" --set train.max_steps="$4" --set train.epochs=0 --set train.eval_max_batches=1 \
    --set train.progress=false --set train.log_every=1 --set train.threads="$threads" --set optim.warmup_steps=0 \
    --set train.checkpoint_every=0 --set train.sample_every_s=0 --set train.recompute="$5" "${sets[@]}" \
    --run-dir "$work/$1" >"$work/$1.out" 2>&1 || { cat "$work/$1.out"; exit 1; }
}
layers() { sed -n 's/^layers *= *\([0-9]*\).*/\1/p' "$here/../configs/bench-$1.toml"; }
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for p in $presets; do
  L=$(layers "$p")
  for m in $modes; do
    run "${p}_${m}_hi" "$p" $((2 * L)) 1 "$m"
    run "${p}_${m}_lo" "$p" $((L / 2)) 1 "$m"
  done
  for r in $(seq "$rounds"); do
    for m in $modes; do run "${p}_${m}_t$r" "$p" "$L" "$steps" "$m"; done
  done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$work" "$here/../configs" "$batch" "$rounds" "$presets" <<'PY'
import json, re, sys
work, configs, batch, rounds, presets = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5].split()
MB = 1e6
def summary(name):
    return json.load(open(f"{work}/{name}/summary.json"))
def steps(name):  # every step after the first: (seconds, backward seconds)
    recs = [json.loads(l) for l in open(f"{work}/{name}/metrics.jsonl")]
    return [(r["step_seconds"], r["phases"]["backward"]) for r in recs if r["type"] == "train" and r["step"] > 1]
def model(preset):  # the [model] table of the preset (numbers only)
    m, section = {}, None
    for line in open(f"{configs}/bench-{preset}.toml"):
        line = line.split("#")[0].strip()
        if line.startswith("["): section = line
        elif section == "[model]" and "=" in line:
            k, v = (x.strip() for x in line.split("=", 1))
            if re.fullmatch(r"-?\d+(\.\d+)?", v): m[k] = float(v)
    return m
# What a block keeps per layer, in floats, by count (src/models/*/block.cpp): R rows, d wide, H heads
# of T positions; the Transformer: norm outputs and residuals 4Rd, qkv 3Rd, context Rd, probabilities
# RHT, the feed-forward activation R·ff, the norms' statistics 4R; Llama: 4Rd, qkv R(H+2K)hd, context
# Rd, probabilities RHT, gate|up 2R·f, SwiGLU's output R·f, RMSNorm's 2R. Selective drops RHT (and Llama's
# R·f); full keeps the block's output Rd.
def theory(preset, m):
    T, d, H = int(m["seq_len"]), int(m["dim"]), int(m["heads"])
    R = batch * T
    if preset == "llama":
        K, f, hd = int(m.get("kv_heads", 0)) or H, int(m["ff_dim"]), d // H
        none = 4 * R * d + R * (H + 2 * K) * hd + R * d + R * H * T + 3 * R * f + 2 * R
        sel = none - R * H * T - R * f
    else:
        none = 4 * R * d + 3 * R * d + R * d + R * H * T + R * int(m["ff_dim"]) + 4 * R
        sel = none - R * H * T
    return {"none": 4 * none, "selective": 4 * sel, "full": 4 * R * d}
print(f"per layer and step, batch {batch}, f32; step time and run RSS: the preset's layers, the fastest step of {rounds} rounds")
print(f"{'preset':<7} {'recompute':<10} {'planned MB':>10} {'by count':>9} {'ratio':>6} {'RSS MB':>7} "
      f"{'run RSS MB':>10} {'ratio':>6} {'ms/step':>8} {'ratio':>6} {'backward ms':>11}")
for p in presets:
    m, L = model(p), int(model(p)["layers"])
    th = theory(p, m)
    rows = {}
    for mode in ("none", "selective", "full"):
        hi, lo = summary(f"{p}_{mode}_hi"), summary(f"{p}_{mode}_lo")
        span = 2 * L - L // 2
        layer = (hi["activation_bytes"] - lo["activation_bytes"]) / span
        rss = (hi["peak_rss_mb"] - lo["peak_rss_mb"]) / span
        names = [f"{p}_{mode}_t{r}" for r in range(1, rounds + 1)]
        fastest = min(x for n in names for x in steps(n))
        rows[mode] = (layer, rss, max(summary(n)["peak_rss_mb"] for n in names), 1000 * fastest[0], 1000 * fastest[1])
    base = rows["none"]
    for mode, (layer, rss, run_rss, ms, bwd) in rows.items():
        print(f"{p:<7} {mode:<10} {layer / MB:10.2f} {th[mode] / MB:9.2f} {layer / base[0]:6.2f} {rss:7.1f} "
              f"{run_rss:10.0f} {run_rss / base[2]:6.2f} {ms:8.0f} {ms / base[3]:6.2f} {bwd:11.0f}")
print("planned: the arena's growth per layer (dtrain's own plan); by count: what a block keeps, counted by hand;"
      " RSS: peak resident memory's growth per layer (with the layer's parameters, gradients and AdamW state; the"
      " arena grows in 64 MiB chunks); run RSS: the whole run's peak; ratios to recompute = none.")
PY
