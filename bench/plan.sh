#!/usr/bin/env bash
# `dtrain plan` against runs, side by side in one run: for each layout, the planner's prediction
# (on a profile of this machine measured by `dtrain plan --calibrate` for that many ranks of one
# thread) beside the run's own figures: the planned parts (model state, gather buffers, activations,
# context-parallel buffers, the CPU kernels' scratch) against the run's account of them, the planned
# total (with the profile's process memory) against the run's whole account and its peak RSS, the
# predicted step time against the measured steady step time. Bounds (issue 42): memory within 5% of the account and 10% of the
# peak RSS, step time within 15%; each row says which it misses, and the script exits 1 if any does.
# usage: bench/plan.sh [--bin DIR] [--steps N] [--layouts "one ddp2 …"] [--profiles DIR] [--set key=value ...]
#   --profiles: cpu1.toml, cpu2.toml and cpu4.toml measured before (dtrain plan --calibrate --ranks-per-node R
#   --threads 1 --save DIR/cpuR.toml), instead of measuring them again (three minutes)
#   layouts: one (1 process), recompute (1 process, full), ddp2, fsdp2, tp2, tp2sp, pp2 (1F1B, m 4),
#   pp2gpipe (GPipe, m 4), cp2, ep2 (a mixture of experts), hsdp4 (2 × 2), fsdp4, dp2tp2, pp2dp2
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/../build/bin steps=11 sets=() profiles=
layouts="one recompute ddp2 fsdp2 tp2 tp2sp pp2 pp2gpipe cp2 ep2 hsdp4 fsdp4 dp2tp2 pp2dp2"
source "$here/lib.sh"
bench_options "--steps steps --layouts layouts --profiles profiles --set sets+" "$@"
bench_work
bench_data
dense=(--config "$here/../configs/quickstart.toml" --set model.dim=256 --set model.heads=4 --set model.layers=4
  --set model.ff_dim=1024 --set model.seq_len=128)
moe=(--config "$here/../configs/moe-tiny.toml" --set model.dim=256 --set model.heads=4 --set model.kv_heads=2
  --set model.layers=4 --set model.expert_ff=256 --set model.seq_len=128)
common=(--set data.dir="$work/data" --set data.stride=16 --set train.global_batch=16 --set train.batch_size=8
  --set train.max_steps="$steps" --set train.eval_every=0 --set train.checkpoint_every=0 --set train.threads=1
  --set optim.warmup_steps=0 "${bench_quiet[@]}" "${sets[@]}")

layout() {  # $1 = name: sets "n", "mesh" (dtrain plan --mesh), "extra" (the run's --set) and "model"
  model=("${dense[@]}")
  case $1 in
    one) n=1 mesh=pp=1 ;;
    recompute) n=1 mesh=pp=1,recompute=full ;;
    ddp2) n=2 mesh=dp_replicate=2 ;;
    fsdp2) n=2 mesh=dp_shard=2 ;;
    tp2) n=2 mesh=tp=2 ;;
    tp2sp) n=2 mesh=tp=2,sp=1 ;;
    pp2) n=2 mesh=pp=2,schedule=1f1b,m=4 ;;
    pp2gpipe) n=2 mesh=pp=2,schedule=gpipe,m=4 ;;
    cp2) n=2 mesh=cp=2 ;;
    ep2) n=2 mesh=dp_shard=2,ep=2 model=("${moe[@]}") ;;
    hsdp4) n=4 mesh=dp_replicate=2,dp_shard=2 ;;
    fsdp4) n=4 mesh=dp_shard=4 ;;
    dp2tp2) n=4 mesh=dp_replicate=2,tp=2 ;;
    pp2dp2) n=4 mesh=pp=2,dp_replicate=2,schedule=1f1b,m=4 ;;
    *) echo "unknown layout $1 (see the header of $0)" >&2; exit 2 ;;
  esac
  extra=(--set parallel.dp_replicate=1)
  local kv k v
  for kv in ${mesh//,/ }; do
    k=${kv%%=*} v=${kv#*=}
    case $k in
      sp) extra+=(--set parallel.tp_sequence=true) ;;
      schedule) extra+=(--set parallel.pp_schedule="$v") ;;
      m) extra+=(--set parallel.microbatches="$v") ;;
      recompute) extra+=(--set train.recompute="$v") ;;
      *) extra+=(--set parallel."$k"="$v") ;;
    esac
  done
}

# run_and_plan NAME: the layout run for real, and planned on its world size's profile.
run_and_plan() {
  layout "$1"
  if [ "$n" -eq 1 ]; then
    "$bin/dtrain" train "${model[@]}" "${common[@]}" "${extra[@]}" --run-dir "$work/$1" >"$work/$1.out" 2>&1
  else
    OMP_NUM_THREADS=1 "$bin/dtrun" --standalone --nproc-per-node "$n" --no-tag "$bin/dtrain" train "${model[@]}" \
      "${common[@]}" "${extra[@]}" --run-dir "$work/$1" >"$work/$1.out" 2>&1
  fi || { cat "$work/$1.out"; echo "run $1 failed" >&2; exit 1; }
  "$bin/dtrain" plan "${model[@]}" "${common[@]}" --world "$n" --mesh "$mesh" --hardware "$work/cpu$n.toml" --json \
    >"$work/$1.plan.json"
}

# Layouts of one world size run right after that size's calibration: this virtual machine's speed
# drifts by 10-20% over minutes, and a profile measured a quarter of an hour before a run would time
# the drift, not the model.
[ -n "$profiles" ] || echo "calibrating this machine for 1, 2 and 4 ranks of one thread, each before its layouts"
for r in 1 2 4; do
  group=()
  for name in $layouts; do layout "$name"; [ "$n" -ne "$r" ] || group+=("$name"); done
  [ ${#group[@]} -gt 0 ] || continue
  if [ -n "$profiles" ]; then
    cp "$profiles/cpu$r.toml" "$work/cpu$r.toml"
  else
    "$bin/dtrain" plan --calibrate --ranks-per-node $r --threads 1 --save "$work/cpu$r.toml" >/dev/null
  fi
  for name in "${group[@]}"; do run_and_plan "$name"; done
done

python3 - "$work" $layouts <<'PYEOF'
import json, sys
work, names = sys.argv[1], sys.argv[2:]
parts = ("model_state_bytes", "gather_buffer_bytes", "activation_bytes", "context_buffer_bytes", "kernel_scratch_bytes")
print(f"{'layout':10} {'parts MiB':>10} {'run':>8} {'plan MiB':>9} {'account':>8} {'/acct':>6} {'peak RSS':>9} "
      f"{'/RSS':>6} {'step ms':>8} {'run ms':>8} {'/run':>6}  misses")
bad = 0
for name in names:
    run = json.load(open(f"{work}/{name}/summary.json"))
    plan = json.load(open(f"{work}/{name}.plan.json"))
    rank0 = next(r for r in plan["ranks"] if r["rank"] == 0)  # summary.json's parts are rank 0's
    planned_parts = sum(rank0[k] for k in parts)
    run_parts = sum(run[k] for k in parts)
    worst = plan["worst_rank"]  # the plan's most loaded rank against that rank's account and peak
    need, acct = plan["need_bytes"], run["accounted_mb_by_rank"][worst] * 2**20
    rss = run["peak_rss_mb_by_rank"][worst] * 2**20
    step, measured = plan["step_s"], run["step_time"]["mean_s"]
    misses = []
    if planned_parts != run_parts: misses.append("parts")
    if abs(need / acct - 1) > 0.05: misses.append("account 5%")
    if abs(need / rss - 1) > 0.10: misses.append("RSS 10%")
    if abs(step / measured - 1) > 0.15: misses.append("time 15%")
    bad += bool(misses)
    print(f"{name:10} {planned_parts / 2**20:10.1f} {run_parts / 2**20:8.1f} {need / 2**20:9.1f} {acct / 2**20:8.1f} "
          f"{need / acct:6.3f} {rss / 2**20:9.1f} {need / rss:6.3f} {step * 1e3:8.1f} {measured * 1e3:8.1f} "
          f"{step / measured:6.3f}  {', '.join(misses) or '-'}")
    print(json.dumps({"layout": name, "planned_parts": planned_parts, "run_parts": run_parts, "need": need,
                      "accounted": acct, "peak_rss": rss, "step_s": step, "measured_s": measured}), file=sys.stderr)
print(f"{len(names) - bad} of {len(names)} layouts within every bound")
# where the step goes: the planned computation (passes and update) and waits (communication, bubble)
# against rank 0's phases (forward, backward, optimizer; comm)
print(f"\n{'layout':10} {'compute ms':>11} {'run':>8} {'/run':>6} {'waits ms':>9} {'run':>8}")
for name in names:
    phases = json.load(open(f"{work}/{name}/summary.json"))["step_time"]["phases"]
    plan = json.load(open(f"{work}/{name}.plan.json"))
    ran = sum(phases[k]["mean_s"] for k in ("forward", "backward", "optimizer"))
    planned = plan["compute_s"] + plan["optimizer_s"]
    waits = sum(plan[k] for k in ("bubble_s", "dp_s", "tp_s", "cp_s", "ep_s"))
    print(f"{name:10} {planned * 1e3:11.1f} {ran * 1e3:8.1f} {planned / ran:6.3f} {waits * 1e3:9.1f} "
          f"{phases['comm']['mean_s'] * 1e3:8.1f}")
sys.exit(1 if bad else 0)
PYEOF
