#!/usr/bin/env bash
# Pipeline bubbles, side by side in one run: for each schedule, the idle share rank 0 measured from
# its own action timeline (1 − compute time / pass time, over the run's passes) beside the bubble
# simulated for rank 0 from the actions' measured durations per stage (summary.json's
# pp_stage_ms), the simulated bubble of equal stages (F 1, B 2, I 1, W 1) and the textbook one,
# with the activation slots per rank and rank 0's planned activation memory; then the same runs
# with the stages balanced by the units' measured costs (summary.json's pp_unit_costs, given back as
# parallel.pp_unit_costs); and one process's step time on the same batch. Target: measured within 5
# points of simulated-from-measured for 1f1b, zb-h1 and zb-v. pp 2 by default (one thread per rank on
# this 2-core machine); --pp 4 where there are 4+ cores. --timeline DIR keeps each schedule's Chrome
# trace (trace.json, for Perfetto).
# usage: bench/pp_bubble.sh [--bin DIR] [--pp P] [--micro M] [--steps N] [--timeline DIR] [--set key=value ...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/../build/bin pp=2 micro=8 steps=8 keep="" sets=()
source "$here/lib.sh"
bench_options "--pp pp --micro micro --steps steps --timeline keep --set sets+" "$@"
py=/usr/bin/python3; [ -x "$py" ] || py=python3
bench_work
bench_data
common=(--config "$here/../configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=256
  --set model.heads=4 --set model.ff_dim=1024 --set model.layers=8 --set model.seq_len=64 --set data.stride=64
  --set train.batch_size=$((2 * micro)) --set train.epochs=0 --set train.max_steps="$steps"
  --set train.eval_max_batches=1 --set train.progress=false --set train.log_every=1000 --set train.threads=1
  --set optim.warmup_steps=0 --set train.checkpoint_every=0 "${sets[@]}")
"$bin/dtrain" train "${common[@]}" --run-dir "$work/one" >"$work/one.out" 2>&1 || { cat "$work/one.out"; exit 1; }
schedules=(gpipe 1f1b interleaved-1f1b zb-h1 zb-v)
run_schedule() {  # NAME SCHEDULE [--set …]: one pipeline run into $work/NAME
  local name=$1 s=$2 v=1; shift 2
  case $s in interleaved-1f1b|zb-v) v=2;; esac
  "$bin/dtrun" --standalone --nproc-per-node "$pp" "$bin/dtrain" train "${common[@]}" --set parallel.pp="$pp" \
    --set parallel.dp_replicate=1 --set parallel.pp_schedule="$s" --set parallel.pp_virtual=$v \
    --set parallel.microbatches="$micro" --set train.trace=true "$@" --run-dir "$work/$name" >"$work/$name.out" 2>&1 ||
    { cat "$work/$name.out"; exit 1; }
}
for s in "${schedules[@]}"; do
  v=1; case $s in interleaved-1f1b|zb-v) v=2;; esac
  run_schedule "$s" "$s"
  costs=$("$py" -c "import json,sys; print(json.load(open(sys.argv[1]))['pp_unit_costs'])" "$work/$s/summary.json")
  run_schedule "${s}_balanced" "$s" --set parallel.pp_unit_costs="$costs"
  "$bin/dtrain" plan --pp "$pp" --virtual $v --microbatches "$micro" --schedule "$s" >"$work/$s.plan"
  [ -z "$keep" ] || { mkdir -p "$keep"; cp "$work/$s/trace.json" "$keep/$s.json"; }
done
"$py" - "$work" "$pp" "${schedules[@]}" <<'PYEOF'
import json, re, sys
work, pp, schedules = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print(f"{'schedule':<18} {'stages':<8} {'measured':>8} {'sim.meas':>8} {'diff':>6} {'sim.equal':>9} {'textbook':>8}  "
      f"{'slots per rank':<20} {'act. rank 0':>11}  {'tokens/s':>8}  target")
one = json.load(open(f"{work}/one/summary.json"))
rows = []
for s in schedules:
    plan = open(f"{work}/{s}.plan").read()
    textbook = re.search(r"bubble \(textbook[^)]*\): ([0-9.]+)", plan)
    slots = re.search(r"activation slots per stage: (.*)", plan).group(1).replace("rank ", "r")
    for name, how in ((s, "flops"), (s + "_balanced", "measured")):
        r = json.load(open(f"{work}/{name}/summary.json"))
        meas, sim = 100 * r["pp_idle_share"], 100 * r["pp_simulated_bubble_measured_by_rank"][0]
        target = ""
        if s in ("1f1b", "zb-h1", "zb-v"):
            target = "PASS" if abs(meas - sim) <= 5 else "FAIL"
        print(f"{s:<18} {how:<8} {meas:7.1f}% {sim:7.1f}% {meas - sim:+5.1f} {100 * r['pp_simulated_bubble']:8.1f}% "
              f"{100 * float(textbook.group(1)) if textbook else float('nan'):7.1f}%  {slots:<20} "
              f"{r['activation_bytes'] / 1e6:8.1f} MB  {r['train_tokens_per_s']:8.0f}  {target}")
print(f"one process, same batch: {one['train_tokens_per_s']:.0f} tokens/s; activations {one['activation_bytes']/1e6:.1f} MB")
for s in schedules:
    for name in (s, s + "_balanced"):
        r = json.load(open(f"{work}/{name}/summary.json"))
        print(f"  {name:<27} {r['train_tokens_per_s']:.0f} tokens/s ({r['train_tokens_per_s']/one['train_tokens_per_s']:.2f}x), "
              f"{r['pp_bytes_sent_per_pass']/1e6:.2f} MB sent per pass by rank 0; unit costs (ms per pass) {r['pp_unit_costs']}")
print("stages: flops = balanced by the units' FLOPs; measured = by the first run's measured unit costs (parallel.pp_unit_costs).")
print("measured: rank 0's idle share of its pass time; sim.meas: rank 0's bubble simulated from the run's measured action")
print("durations per stage; sim.equal: every stage costing F 1, B 2, I 1, W 1; target: |measured - sim.meas| <= 5 points.")
PYEOF
