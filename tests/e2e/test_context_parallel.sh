#!/usr/bin/env bash
# Context parallel end to end (dropout on, SGD-momentum, 30 steps across an epoch end with a short last
# step): the course's Transformer at cp 2 and cp 4 (ring and all-to-all), cp 2 × DDP 2, × FSDP 2,
# × TP 2 with sequence parallel, × PP 2 (1F1B), × TP 2 × PP 2 (3D + cp), × FSDP 2 × TP 2 (all-to-all)
# and cp 2 with gradient accumulation; a
# pre-norm tied GELU Transformer with learned positions at cp 2 with full recompute; the Llama kind
# (RoPE, grouped-query attention) at cp 2 ring with selective recompute, cp 2 all-to-all, cp 4 ring
# and cp 2 × PP 2 (ZB-H1): each ends with one process's weights (relative 1e-5) and losses. A cp 2
# checkpoint goes on at cp 1 and at cp 4 to the uninterrupted trajectory, and a killed cp 2 rank is
# restarted by dtrun onto it. Sequence lengths 2·cp does
# not divide, the CNN, and an all-to-all over heads cp does not divide are refused in one line.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to compare weights"
steps=30
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=32
  --set model.heads=4 --set model.layers=2 --set model.ff_dim=64 --set model.seq_len=32
  --set data.stride="$(epoch_stride 32 8 $steps)" --set train.max_steps=$steps --set train.log_every=1
  --set train.progress=false --set train.eval_max_batches=2 --set train.checkpoint_every=15
  --set model.dropout=0.1 --set optim.name=sgd --set optim.momentum=0.9 --set train.lr=0.05
  --set optim.warmup_steps=0 --set train.keep_checkpoints=4)
one() { run_one "$1" --set train.batch_size=8 --set train.threads=2 "${@:2}"; }  # one process, batch 8
ranks() { run_ranks "$1" "$2" --set train.threads=1 "${@:3}"; }                  # N ranks, one thread each
cp2=(--set parallel.cp=2 --set parallel.dp_replicate=1)

one single
ranks cp2 2 --set train.batch_size=8 "${cp2[@]}"
ranks cp2_a2a 2 --set train.batch_size=8 "${cp2[@]}" --set parallel.cp_mode=alltoall
ranks cp4 4 --set train.batch_size=8 --set parallel.cp=4 --set parallel.dp_replicate=1
ranks cp2_ddp2 4 --set train.batch_size=4 --set parallel.cp=2 --set parallel.dp_replicate=2
ranks cp2_fsdp2 4 --set train.batch_size=4 "${cp2[@]}" --set parallel.dp_shard=2
ranks cp2_tp2 4 --set train.batch_size=8 "${cp2[@]}" --set parallel.tp=2 --set parallel.tp_sequence=true
ranks cp2_pp2 4 --set train.batch_size=8 "${cp2[@]}" --set parallel.pp=2
ranks cp2_accum 2 --set train.batch_size=4 --set train.grad_accum=2 "${cp2[@]}"
ranks cp4_a2a 4 --set train.batch_size=8 --set parallel.cp=4 --set parallel.dp_replicate=1 --set parallel.cp_mode=alltoall
ranks cp2_tp2_pp2 8 --set train.batch_size=8 "${cp2[@]}" --set parallel.tp=2 --set parallel.tp_sequence=true \
  --set parallel.pp=2
ranks cp2_fsdp2_tp2 8 --set train.batch_size=4 "${cp2[@]}" --set parallel.dp_shard=2 --set parallel.tp=2 \
  --set parallel.cp_mode=alltoall
for r in cp2 cp2_a2a cp4 cp2_ddp2 cp2_fsdp2 cp2_tp2 cp2_pp2 cp2_accum cp4_a2a cp2_tp2_pp2 cp2_fsdp2_tp2; do
  same_weights single $r 1e-5
done
grep -q "^\[0\]: context parallel: 2 ranks, ring attention; each holds 16 of every sequence's 32 positions" \
  "$work/cp2.out" || fail "cp2 did not report its layout"
grep -q "^\[0\]: mesh: pp 1 × dp_replicate 1 × dp_shard 2 × cp 2 × tp 1 (4 ranks, tp fastest, then cp" \
  "$work/cp2_fsdp2.out" || fail "cp2_fsdp2: no mesh line with cp"

pre=(--set model.tied=true --set model.norm=pre --set model.positions=learned --set model.activation=gelu)
one single_pre "${pre[@]}"
ranks cp2_pre 2 --set train.batch_size=8 "${cp2[@]}" "${pre[@]}" --set train.recompute=full
same_weights single_pre cp2_pre 1e-5

llama=(--set model.kind=llama --set model.kv_heads=2 --set model.ff_dim=96)
config="$work/llama.toml"
printf '[train]\nseed = 1\n' >"$config"
lcommon=("${common[@]/#"$src/configs/quickstart.toml"/$config}")
lone() { "$bin/dtrain" train "${lcommon[@]}" "${llama[@]}" --set train.batch_size=8 --set train.threads=2 \
  --run-dir "$work/$1" >"$work/$1.out" 2>&1 || { cat "$work/$1.out"; fail "run $1 failed"; }; }
lranks() { "$bin/dtrun" --standalone --nproc-per-node "$2" "$bin/dtrain" train "${lcommon[@]}" "${llama[@]}" \
  --set train.threads=1 --set train.batch_size=8 "${@:3}" --run-dir "$work/$1" >"$work/$1.out" 2>&1 ||
  { cat "$work/$1.out"; fail "run $1 failed"; }; }
lone llama
lranks llama_cp2 2 "${cp2[@]}" --set train.recompute=selective
lranks llama_a2a 2 "${cp2[@]}" --set parallel.cp_mode=alltoall
lranks llama_cp4 4 --set parallel.cp=4 --set parallel.dp_replicate=1
lranks llama_cp2_pp2 4 "${cp2[@]}" --set parallel.pp=2 --set parallel.pp_schedule=zb-h1
for r in llama_cp2 llama_a2a llama_cp4 llama_cp2_pp2; do same_weights llama $r 1e-5; done
"$py" "$src/tests/python/compare_losses.py" "$work" "$steps" single:cp2:1e-5 single:cp2_a2a:1e-5 single:cp4:1e-5 \
  single:cp2_fsdp2:1e-5 single:cp2_tp2:1e-5 single:cp2_pp2:1e-5 single_pre:cp2_pre:1e-5 llama:llama_cp2:1e-5 \
  llama:llama_a2a:1e-5 llama:llama_cp4:1e-5 || fail "a context-parallel run's losses differ"

"$py" - "$work" <<'PYEOF'
import json, sys
work = sys.argv[1]
one = json.load(open(f"{work}/single/summary.json"))
for run in ("cp2", "cp2_a2a", "cp4", "cp2_tp2"):
    s = json.load(open(f"{work}/{run}/summary.json"))
    if abs(s["test_loss"] - one["test_loss"]) > 1e-5 * one["test_loss"]:
        sys.exit(f"FAIL: {run}'s test loss {s['test_loss']} differs from one process's {one['test_loss']}")
ring, a2a = (json.load(open(f"{work}/{r}/summary.json")) for r in ("cp2", "cp2_a2a"))
# per step and layer, forward: 1 key/value block sent; backward: 1 block and 2 gradients of blocks
block = 8 * 16 * 2 * 32 * 4  # batch × positions held × (k and v) × dim × bytes
# (2 layers; the epoch's short last step sends less, so the mean is a little under the full steps')
full = 2 * 4 * block
if ring.get("cp_mode") != "ring" or not 0.9 * full < ring["cp_bytes_per_step"] <= full:
    sys.exit(f"FAIL: the ring sent {ring.get('cp_bytes_per_step')} bytes per step, expected just under {full}")
if a2a.get("cp_mode") != "alltoall" or not a2a["cp_bytes_per_step"] > 0:
    sys.exit(f"FAIL: the all-to-all run reports no traffic: {a2a}")
print(f"ok  test losses equal one process's; the ring sent {ring['cp_bytes_per_step']:.0f} bytes per step "
      f"(4 blocks per layer), the all-to-all {a2a['cp_bytes_per_step']:.0f}")
PYEOF

# --- Checkpoints do not depend on cp: cp 2's step-15 checkpoint goes on at cp 1 and at cp 4.
"$bin/dtrain" train --resume "$(ck "$work/cp2" 15)" --run-dir "$work/cont_one" --set train.threads=2 \
  --set parallel.cp=1 >"$work/cont_one.out" 2>&1 || { cat "$work/cont_one.out"; fail "one process did not resume cp 2's checkpoint"; }
grep -q "resumed from $(ck "$work/cp2" 15) (step 15," "$work/cont_one.out" || fail "cont_one did not resume at step 15"
same_weights single cont_one 1e-5
ranks cont_cp4 4 --resume "$(ck "$work/cp2" 15)" --set train.batch_size=8 --set parallel.cp=4 --set parallel.dp_replicate=1
same_weights single cont_cp4 1e-5
echo "ok  cp 2's checkpoint resumed at cp 1 and cp 4 ends on the uninterrupted trajectory"
# A killed rank: dtrun restarts the cp 2 job, which resumes from its step-20 checkpoint and ends as
# the uninterrupted run does.
ranks straight 2 --set train.batch_size=8 "${cp2[@]}" --set train.checkpoint_every=10
restart_after_kill 000000020 --nproc-per-node 2 "$bin/dtrain" train "${common[@]}" --set train.threads=1 \
  --set train.batch_size=8 "${cp2[@]}" --set train.checkpoint_every=10
echo "ok  a killed cp 2 rank: restarted, resumed at step 20, the uninterrupted weights"

# --- Refusals, one line each.
bad() {  # $1 = what, $2 = ranks, $3 = the expected error, then arguments
  local what=$1 n=$2 needle=$3; shift 3
  local rc=0
  "$bin/dtrun" --standalone --nproc-per-node "$n" "$bin/dtrain" train "${common[@]}" --set train.threads=1 "$@" \
    --run-dir "$work/bad" >"$work/bad.out" 2>&1 || rc=$?
  [ "$rc" -ne 0 ] || fail "$what was accepted"
  [ "$(grep -c "dtrain: error: $needle" "$work/bad.out")" -eq 1 ] || { cat "$work/bad.out"; fail "$what was not named once"; }
  echo "ok  $what: $(grep -o "dtrain: error: .*" "$work/bad.out" | cut -c1-150)"
}
bad "a sequence 2·cp does not divide" 2 "parallel.cp = 2 splits each sequence into 2·cp = 4 chunks, and model.seq_len = 30" \
  "${cp2[@]}" --set model.seq_len=30
if [ -d /usr/share/datasets/fashion-mnist ]; then
  "$bin/dtrain" data fashion-mnist --out "$work/fm" >/dev/null
  rc=0
  "$bin/dtrun" --standalone --nproc-per-node 2 "$bin/dtrain" train --config "$src/configs/mnist-cnn.toml" \
    --set data.dir="$work/fm" --set train.threads=1 "${cp2[@]}" --run-dir "$work/cnn" >"$work/cnn.out" 2>&1 || rc=$?
  [ "$rc" -ne 0 ] && [ "$(grep -c "dtrain: error: parallel.cp > 1 splits sequences, and model.kind = cnn has none" \
    "$work/cnn.out")" -eq 1 ] || { cat "$work/cnn.out"; fail "the CNN at cp 2 was not refused once"; }
  echo "ok  the CNN at cp 2 refused"
fi
bad "all-to-all over 2 heads at cp 4" 4 "parallel.cp_mode = alltoall gives each of the parallel.cp = 4 ranks a share" \
  --set parallel.cp=4 --set parallel.dp_replicate=1 --set parallel.cp_mode=alltoall --set model.heads=2
expect_one_error "cp 0" "parallel.cp = 0 (--set) is outside 1.." "$bin/dtrain" train "${common[@]}" --set parallel.cp=0 \
  --run-dir "$work/e1"
expect_one_error "cp larger than the world" "parallel.cp 2 × parallel.tp 1 = 2 ranks, but the job has 1" \
  "$bin/dtrain" train "${common[@]}" "${cp2[@]}" --run-dir "$work/e2"
echo "PASS: context parallel ring and all-to-all, with DDP, FSDP, TP, PP, recompute, both kinds, checkpoints across cp"
