#!/usr/bin/env bash
# Pipeline parallelism end to end (a GELU model: with ReLU a unit within round-off of its kink can
# flip in one run and not the other, and SGD-momentum carries that apart): every schedule (gpipe, 1f1b, interleaved-1f1b and zb-v with 2
# stages per rank, zb-h1) at pp 2 and pp 4 ends 30 steps (dropout on) with the weights of one
# process with the same global batch under SGD-momentum (relative 1e-5); AdamW's loss trajectory
# agrees within 1e-5; pp 2 × DDP 2 with gradient accumulation and clipping, and pp 2 × tp 2 ×
# dp_shard 2 (8 ranks; FSDP gathers each unit once per step) agree too. A list read from a file
# runs; broken lists are refused with their problem named; a bad split is named. Checkpoints
# reshard across pp degrees (pp 2 → 1 process → pp 2 × dp 2: bit-identical weights and optimizer
# state); a stage killed mid-run stops the job naming it, and with a restart the job resumes and ends
# on the uninterrupted trajectory. A Chrome trace of every rank's actions is written when asked.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to compare weights"
steps=30
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=32
  --set model.heads=2 --set model.layers=6 --set model.ff_dim=64 --set model.seq_len=16
  --set model.activation=gelu --set data.stride="$(epoch_stride 16 8 $steps)" --set train.max_steps=$steps --set train.log_every=1 --set train.progress=false
  --set train.eval_max_batches=2 --set model.dropout=0.1 --set train.batch_size=8
  --set optim.name=sgd --set optim.momentum=0.9 --set train.lr=0.05 --set optim.warmup_steps=0 --set train.epochs=0)
one() { run_one "$1" --set train.threads=2 "${@:2}"; }                      # one process, batch 8
ranks() { run_ranks "$1" "$2" --set train.threads=1 "${@:3}"; }             # N ranks, one thread each
pipe() { ranks "$1" "$2" --set parallel.pp="$2" --set parallel.dp_replicate=1 "${@:3}"; }
one single
runs=()
for pp in 2 4; do
  for s in gpipe 1f1b interleaved-1f1b zb-h1 zb-v; do
    v=1; case $s in interleaved-1f1b|zb-v) v=2;; esac
    pipe "pp${pp}_$s" "$pp" --set parallel.pp_schedule=$s --set parallel.pp_virtual=$v \
      --set parallel.microbatches=$((2 * pp))
    runs+=("pp${pp}_$s")
  done
done
for r in "${runs[@]}"; do same_weights single "$r" 1e-5; done
grep -q "^\[0\]: pipeline: zb-v, 4 ranks × 2 stages, 8 micro-batches per pass; rank 0 holds embed" \
  "$work/pp4_zb-v.out" || { cat "$work/pp4_zb-v.out"; fail "pp4_zb-v did not report its layout"; }
echo "ok  every schedule at pp 2 and 4 ends with one process's weights"

adamw=(--set optim.name=adamw --set train.lr=0.002)
one single_adamw "${adamw[@]}"
pipe pp2_adamw 2 --set parallel.pp_schedule=1f1b --set parallel.microbatches=4 "${adamw[@]}"
pipe pp4_zbv_adamw 4 --set parallel.pp_schedule=zb-v --set parallel.pp_virtual=2 --set parallel.microbatches=8 \
  "${adamw[@]}"
# DDP across two pipelines with gradient accumulation on top; clipping (a norm over every stage)
one single_accum --set train.batch_size=16 --set train.grad_accum=2
ranks pp2_ddp2 4 --set parallel.pp=2 --set parallel.dp_replicate=2 --set train.batch_size=8 \
  --set train.grad_accum=2 --set parallel.microbatches=4
same_weights single_accum pp2_ddp2 1e-5
clip=(--set optim.grad_clip=0.3)
one single_clip "${clip[@]}"
pipe pp2_clip 2 --set parallel.pp_schedule=zb-h1 --set parallel.microbatches=4 "${clip[@]}"
same_weights single_clip pp2_clip 1e-5
# 3D: pp 2 × tp 2 × dp_shard 2
ranks pp2_tp2_fsdp2 8 --set parallel.pp=2 --set parallel.tp=2 --set parallel.dp_shard=2 \
  --set parallel.dp_replicate=1 --set train.batch_size=4 --set parallel.microbatches=2
same_weights single pp2_tp2_fsdp2 1e-5
"$py" "$src/tests/python/compare_losses.py" "$work" "$steps" single_adamw:pp2_adamw:1e-5 \
  single_adamw:pp4_zbv_adamw:1e-5 single:pp2_tp2_fsdp2:1e-5 single_accum:pp2_ddp2:1e-5 single_clip:pp2_clip:1e-5 ||
  fail "a pipelined run's losses differ"
"$py" - "$work" <<'PYEOF'
import json, sys
work = sys.argv[1]
one = json.load(open(f"{work}/single/summary.json"))
for run in ("pp2_1f1b", "pp4_zb-v", "pp2_tp2_fsdp2"):
    s = json.load(open(f"{work}/{run}/summary.json"))
    if abs(s["test_loss"] - one["test_loss"]) > 1e-5 * one["test_loss"]:
        sys.exit(f"FAIL: {run}'s test loss {s['test_loss']} differs from one process's {one['test_loss']}")
# FSDP under a pipeline gathers each unit once per step, not once per micro-batch: the bytes
# gathered per step equal this rank's (padded) parameter bytes, not twice them
f = json.load(open(f"{work}/pp2_tp2_fsdp2/summary.json"))
if not (0.99 * f["parameter_bytes"] <= f["fsdp_gathered_bytes_per_step"] <= 1.01 * f["parameter_bytes"] + 4096):
    sys.exit(f"FAIL: FSDP gathered {f['fsdp_gathered_bytes_per_step']} bytes per step for "
             f"{f['parameter_bytes']} bytes of parameters")
clip = [json.loads(l) for l in open(f"{work}/pp2_clip/metrics.jsonl")]
if not any(r.get("grad_norm", 0) > 0.3 for r in clip if r["type"] == "train"):
    sys.exit("FAIL: the clipping run never had a gradient norm above optim.grad_clip: it tested nothing")
print("ok  test losses equal one process's; FSDP gathered once per step; clipping engaged")
PYEOF

# A list from a file (dtrain plan --save) runs; broken lists and a bad split are refused, named.
"$bin/dtrain" plan --pp 2 --microbatches 4 --schedule zb-h1 --save "$work/zb.txt" >"$work/plan.out" ||
  fail "dtrain plan failed"
grep -q "bubble" "$work/plan.out" || fail "dtrain plan printed no bubble"
pipe pp2_file 2 --set parallel.pp_schedule_file="$work/zb.txt"
same_weights single pp2_file 1e-5
sed 's/ 0F1 / /' "$work/zb.txt" >"$work/no_forward.txt"           # rank 0 never forwards micro-batch 1
sed 's/1SEND_B3//' "$work/zb.txt" >"$work/unmatched.txt"           # a receive nobody sends to
for broken in no_forward unmatched; do
  rc=0; "$bin/dtrain" plan --file "$work/$broken.txt" >"$work/$broken.out" 2>&1 || rc=$?
  [ "$rc" -eq 2 ] || { cat "$work/$broken.out"; fail "dtrain plan accepted the $broken list"; }
  rc=0
  "$bin/dtrun" --standalone --nproc-per-node 2 "$bin/dtrain" train "${common[@]}" --set parallel.pp=2 \
    --set parallel.dp_replicate=1 --set parallel.pp_schedule_file="$work/$broken.txt" --run-dir "$work/$broken" \
    >"$work/$broken.train" 2>&1 || rc=$?
  [ "$rc" -ne 0 ] && grep -q "dtrain: error: pipeline schedule .* is not valid: " "$work/$broken.train" ||
    { cat "$work/$broken.train"; fail "training ran the $broken list"; }
done
rc=0
"$bin/dtrun" --standalone --nproc-per-node 2 "$bin/dtrain" train "${common[@]}" --set parallel.pp=2 \
  --set parallel.dp_replicate=1 --set parallel.pp_split=9 --run-dir "$work/badsplit" >"$work/badsplit.out" 2>&1 || rc=$?
[ "$rc" -ne 0 ] && grep -q "dtrain: error: parallel.pp_split = 9: stage boundaries must rise strictly" \
  "$work/badsplit.out" || { cat "$work/badsplit.out"; fail "a split past the last unit was not named"; }
echo "ok  lists from files run; broken lists and a bad split are named"

# --- Checkpoints across pp degrees: pp 2's step-30 checkpoint → 1 process → pp 2 × dp 2.
"$bin/dtrain" train --resume "$(ck "$work/pp2_1f1b" $steps)" --run-dir "$work/rt_one" --set train.threads=2 \
  --set parallel.pp=1 >"$work/rt_one.out" 2>&1 || { cat "$work/rt_one.out"; fail "one process did not resume pp 2's"; }
ranks rt_ddp 4 --resume "$(ck "$work/rt_one" $steps)" --set parallel.pp=2 --set parallel.dp_replicate=2 \
  --set train.batch_size=4
same_checkpoints $steps pp2_1f1b rt_one rt_ddp
echo "ok  round trip pp 2 → 1 process → pp 2 × dp 2: weights and optimizer state bit-identical"

# --- A stage killed mid-run. Without restarts the job stops, naming the pipeline stage that lost
# its peer; with one restart it resumes from its last checkpoint and ends on the trajectory.
restart=(--set parallel.pp=2 --set parallel.dp_replicate=1 --set parallel.pp_schedule=1f1b
  --set parallel.microbatches=4 --set train.max_steps=120 --set train.checkpoint_every=20 --set parallel.timeout_s=20)
ranks straight 2 "${restart[@]}"
restart_after_kill "0000000[0-9]0" --nproc-per-node 2 "$bin/dtrain" train "${common[@]}" --set train.threads=1 \
  "${restart[@]}" --set train.keep_checkpoints=10 --set train.max_steps=120
"$bin/dtrun" --standalone --nproc-per-node 2 "$bin/dtrain" train "${common[@]}" --set train.threads=1 \
  "${restart[@]}" --set train.max_steps=100000 --run-dir "$work/killed" >"$work/killed.out" 2>&1 &
agent=$!
pids+=("$agent")
wait_for 120 test -d "$work/killed/checkpoints/step_000000020" || { cat "$work/killed.out"; fail "no step 20"; }
victim=$(worker_pid "$agent" 1)
[ -n "$victim" ] && kill -9 "$victim"
rc=0; wait "$agent" || rc=$?
[ "$rc" -ne 0 ] || fail "the job went on without a stage"
grep -q "rank 1 (local rank 1 on node 0, pid $victim) " "$work/killed.out" ||
  { cat "$work/killed.out"; fail "the lost stage's rank was not named"; }

# A Chrome trace of every rank's actions, when asked (train.trace; the old key names its successor).
pipe traced 2 --set parallel.pp_schedule=zb-h1 --set parallel.microbatches=4 --set train.trace=true \
  --set train.max_steps=3
"$py" - "$work/traced/trace.json" <<'PYEOF'
import json, re, sys
t = json.load(open(sys.argv[1]))["traceEvents"]
acts = [e for e in t if e.get("ph") == "X" and re.fullmatch(r"\d+[FBIW]\d+", e["name"])]
ops = {e["name"] for e in acts}
pids = {e["pid"] for e in acts}
if not ({"0F0", "1I3", "0W3"} <= ops and pids == {0, 1}):
    sys.exit(f"FAIL: the trace lacks actions or ranks: {sorted(ops)[:10]} … ranks {pids}")
print(f"ok  trace.json: {len(acts)} pipeline actions from ranks {sorted(pids)}")
PYEOF
expect_one_error "pp_timeline renamed" "train.trace" "$bin/dtrain" train "${common[@]}" --set parallel.pp_timeline=true \
  --run-dir "$work/old_key"
echo "PASS: every schedule at pp 2 and 4, AdamW, × DDP with accumulation, 3D, lists from files, checkpoints across pp, a killed stage, timeline"
