#!/usr/bin/env bash
# FSDP against DDP on a ~100M-parameter model (d 768, 12 layers, 12 heads, ff 3072, seq 128, the
# builtin corpus' vocabulary), side by side in one run: per-rank model state (dtrain's own
# accounting) against 16Ψ/N, gather buffers, activations and peak RSS for DDP and FSDP at 1, 2 and
# 4 ranks; step time of FSDP 2 against DDP 2; how much of the all-gather / reduce-scatter time the
# computation hid. On a 2-core machine 4 ranks share 2 cores: their times are not comparable.
# usage: bench/fsdp_memory.sh [--bin DIR] [--batch N] [--steps N] [--ranks "1 2 4"] [--set key=value ...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/../build/bin batch=2 steps=4 ranks="1 2 4" sets=()
source "$here/lib.sh"
bench_options "--batch batch --steps steps --ranks ranks --set sets+" "$@"
bench_work
bench_data
common=(--config "$here/../configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=768
  --set model.heads=12 --set model.layers=12 --set model.ff_dim=3072 --set model.seq_len=128 --set data.stride=128
  --set train.batch_size="$batch" --set train.max_steps="$steps" "${bench_quiet[@]}"
  --set train.threads=1 --set optim.warmup_steps=0 "${sets[@]}")
run() {  # $1 = name, $2 = ranks, then extra settings
  local name=$1 n=$2; shift 2
  if [ "$n" -eq 1 ]; then
    "$bin/dtrain" train "${common[@]}" "$@" --run-dir "$work/$name" >"$work/$name.out" 2>&1
  else
    OMP_NUM_THREADS=1 "$bin/dtrun" --standalone --nproc-per-node "$n" --no-tag "$bin/dtrain" train "${common[@]}" "$@" \
      --run-dir "$work/$name" >"$work/$name.out" 2>&1
  fi || { cat "$work/$name.out"; exit 1; }
}
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
names=()
for n in $ranks; do
  if [ "$n" -eq 1 ]; then run ddp1 1; names+=(ddp1); continue; fi
  run "ddp$n" "$n"; run "fsdp$n" "$n" --set parallel.dp_shard="$n"; names+=("ddp$n" "fsdp$n")
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$work" "${names[@]}" <<'PY'
import json, sys
work, names = sys.argv[1], sys.argv[2:]
MB = 1e6
print(f"{'run':<7} {'Ψ (M)':>7} {'state MB':>9} {'16Ψ/N MB':>9} {'state/ideal':>11} {'gather MB':>10} "
      f"{'activ. MB':>10} {'RSS MiB':>8} {'ms/step':>8} {'comm hidden':>11}")
rows = {}
for name in names:
    s = json.load(open(f"{work}/{name}/summary.json"))
    n = int(''.join(c for c in name if c.isdigit()))
    fsdp = name.startswith("fsdp")
    ideal = 16 * s["parameters"] / (n if fsdp else 1)
    ms = 1000 * s["train_tokens"] / s["steps"] / s["train_tokens_per_s"]
    hidden = f"{100 * s['fsdp_hidden_fraction']:.0f}%" if fsdp else (
        f"{100 * s['ddp_hidden_fraction']:.0f}%" if "ddp_hidden_fraction" in s else "-")
    rows[name] = ms
    print(f"{name:<7} {s['parameters'] / 1e6:7.1f} {s['model_state_bytes'] / MB:9.1f} {ideal / MB:9.1f} "
          f"{s['model_state_bytes'] / ideal:11.3f} {s['gather_buffer_bytes'] / MB:10.1f} "
          f"{s['activation_bytes'] / MB:10.1f} {s['peak_rss_mb']:8.0f} {ms:8.0f} {hidden:>11}")
if "ddp2" in rows and "fsdp2" in rows:
    print(f"step time FSDP 2 / DDP 2: {rows['fsdp2'] / rows['ddp2']:.2f}x")
print("state: parameters + gradients + optimizer state per rank (shards under FSDP), from dtrain's own allocations;"
      " gather: FSDP's gather and gradient buffers; RSS: the peak resident memory of the rank with the most (MiB).")
PY
