#!/usr/bin/env bash
# What watching a job costs, side by side in one run: the same training (dtrun, 2 ranks, 1 thread
# each) with train.trace on and resource samples every 0.1 s, and with neither; alternated
# --rounds times. Prints each round's steady step time (summary.json step_time, after warm-up), the
# medians and their ratio, and the phase clock's own stated cost (always on: timing_overhead_share).
# usage: bench/watch_overhead.sh [--bin DIR] [--preset FILE] [--steps N] [--rounds N] [--set key=value ...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/../build/bin preset=$here/../configs/quickstart.toml steps=30 rounds=5 sets=()
source "$here/lib.sh"
bench_options "--preset preset --steps steps --rounds rounds --set sets+" "$@"
bench_work
bench_data
common=(--config "$preset" --set data.dir="$work/data" --set train.threads=1 --set train.max_steps="$steps"
  --set train.epochs=0 --set train.eval_max_batches=1 --set train.progress=false --set train.log_every=5
  --set train.checkpoint_every=0 "${sets[@]}")
run() {  # $1 = run dir, then settings
  local dir=$1; shift
  OMP_NUM_THREADS=1 "$bin/dtrun" --standalone --nproc-per-node 2 --no-tag "$bin/dtrain" train "${common[@]}" "$@" \
    --run-dir "$dir" >"$dir.log" 2>&1 || { cat "$dir.log"; exit 1; }
}
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
  run "$work/on_$r" --set train.trace=true --set train.sample_every_s=0.1
  run "$work/off_$r" --set train.trace=false --set train.sample_every_s=0
done
/usr/bin/python3 - "$work" "$rounds" <<'PYEOF'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def st(run): return json.load(open(f"{work}/{run}/summary.json"))["step_time"]
on = [st(f"on_{r}") for r in range(1, rounds + 1)]
off = [st(f"off_{r}") for r in range(1, rounds + 1)]
print(f"{'round':>5} {'watched ms/step':>16} {'plain ms/step':>14} {'ratio':>7}")
for r, (a, b) in enumerate(zip(on, off), 1):
    print(f"{r:>5} {1e3*a['mean_s']:16.1f} {1e3*b['mean_s']:14.1f} {a['mean_s']/b['mean_s']:7.3f}")
ma, mb = statistics.median(a["mean_s"] for a in on), statistics.median(b["mean_s"] for b in off)
ratios = sorted(a["mean_s"] / b["mean_s"] for a, b in zip(on, off))
print(f"median {1e3*ma:.1f} ms (trace + 0.1 s samples) vs {1e3*mb:.1f} ms (neither): ratio {ma/mb:.3f} "
      f"(per round {ratios[0]:.3f}..{ratios[-1]:.3f})")
print(f"phase timing's own cost (always on): {statistics.median(s['phase_changes_per_step'] for s in off):.0f} changes "
      f"per step, {100*statistics.median(s['timing_overhead_share'] for s in off):.5f}% of a step")
PYEOF
