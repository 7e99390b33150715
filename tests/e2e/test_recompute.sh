#!/usr/bin/env bash
# Activation recompute end to end (train.recompute): in every layout — one process, DDP 2, FSDP 2,
# TP 2 with and without sequence parallel, PP 2 under 1F1B, ZB-H1 and ZB-V — a run with recompute =
# selective and one with full end 8 steps (dropout on) with exactly the step losses, validation loss
# and final weights of the same layout with recompute = none: the Transformer (post-norm, ReLU), the
# Llama decoder (grouped-query attention) and, in full, the CNN. The planned activations shrink (full
# < selective < none) and summary.json says which was run; under TP the recomputed forward's
# collectives show in the traffic. A bad value, and selective for the CNN, are one line each.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to compare weights"
steps=8
export OMP_NUM_THREADS=1
train=(--set train.max_steps=$steps --set train.epochs=0 --set train.log_every=1 --set train.progress=false
  --set train.eval_max_batches=1 --set train.threads=1 --set train.batch_size=8 --set optim.warmup_steps=0
  --set train.checkpoint_every=0)
transformer=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=32 --set model.heads=2
  --set model.layers=3 --set model.ff_dim=64 --set model.seq_len=16 --set data.stride=16 --set model.dropout=0.1)
printf '[train]\nseed = 1\n' >"$work/llama.toml"
llama=(--config "$work/llama.toml" --set model.kind=llama --set data.dir="$work/data" --set model.dim=32
  --set model.heads=4 --set model.kv_heads=2 --set model.layers=3 --set model.ff_dim=48 --set model.seq_len=16
  --set data.stride=16 --set model.dropout=0.1 --set train.lr=0.01)
# layout NAME RANKS ARGS...: the runs NAME_none, NAME_selective and NAME_full (`common` is the model's)
# agree bit for bit
layout() {
  local name=$1 n=$2 r; shift 2
  for r in ${modes:-none selective full}; do
    if [ "$n" -eq 1 ]; then run_one "${name}_$r" "$@" --set train.recompute=$r
    else run_ranks "${name}_$r" "$n" "$@" --set train.recompute=$r; fi
  done
  for r in ${modes:-none selective full}; do
    [ "$r" = none ] && continue
    "$py" "$src/tests/python/compare_losses.py" "$work" "$steps" "${name}_none:${name}_$r:0" >/dev/null ||
      fail "$name: recompute = $r changed the losses"
    same_weights "${name}_none" "${name}_$r" 0
  done
  echo "ok  $name: ${modes:-none selective full} end on the same bits"
}
pp=(--set parallel.pp=2 --set parallel.dp_replicate=1 --set parallel.microbatches=4)

common=("${transformer[@]}" "${train[@]}")
layout one 1
layout ddp2 2
layout fsdp2 2 --set parallel.dp_shard=2 --set parallel.dp_replicate=1
layout tp2 2 --set parallel.tp=2 --set parallel.dp_replicate=1
layout tp2_sp 2 --set parallel.tp=2 --set parallel.dp_replicate=1 --set parallel.tp_sequence=true
layout pp2_1f1b 2 "${pp[@]}" --set parallel.pp_schedule=1f1b
layout pp2_zbh1 2 "${pp[@]}" --set parallel.pp_schedule=zb-h1
layout pp2_zbv 2 "${pp[@]}" --set parallel.pp_schedule=zb-v --set parallel.pp_virtual=2
common=("${llama[@]}" "${train[@]}")
layout llama_one 1
layout llama_tp2_sp 2 --set parallel.tp=2 --set parallel.dp_replicate=1 --set parallel.tp_sequence=true
layout llama_fsdp2 2 --set parallel.dp_shard=2 --set parallel.dp_replicate=1
layout llama_pp2_zbh1 2 "${pp[@]}" --set parallel.pp_schedule=zb-h1

"$py" - "$work" <<'PYEOF'
import json, sys
work = sys.argv[1]
s = lambda run: json.load(open(f"{work}/{run}/summary.json"))
for model in ("one", "llama_one", "pp2_zbh1"):
    b = {r: s(f"{model}_{r}") for r in ("none", "selective", "full")}
    for r, x in b.items():
        if x["recompute"] != r:
            sys.exit(f"FAIL: {model}_{r}'s summary.json says recompute = {x['recompute']}")
    a = {r: x["activation_bytes"] for r, x in b.items()}
    if not a["full"] < a["selective"] < a["none"]:
        sys.exit(f"FAIL: {model}: planned activations do not shrink: {a}")
    print(f"ok  {model}: activations planned none {a['none']}, selective {a['selective']}, full {a['full']} bytes")
# the recomputed forward runs its tensor-parallel regions again: more traffic, the same numbers
for run, key in (("tp2", "tp_allreduce_bytes_per_step"), ("tp2_sp", "tp_allgather_bytes_per_step")):
    none, full = s(f"{run}_none")[key], s(f"{run}_full")[key]
    if not full > none:
        sys.exit(f"FAIL: {run}: {key} {full} under full recompute, {none} without: the forward ran once?")
    print(f"ok  {run}: {key} {none:.0f} without recompute, {full:.0f} in full")
PYEOF

fashion=/usr/share/datasets/fashion-mnist
if [ -d "$fashion" ]; then
  "$bin/dtrain" data fashion-mnist --out "$work/fm" --valid-count 64 >/dev/null
  common=(--config "$src/configs/mnist-cnn.toml" --set data.dir="$work/fm" --set model.channels=4,8
    --set model.hidden=16 "${train[@]}")
  modes="none full" layout cnn_one 1
  modes="none full" layout cnn_pp2_zbh1 2 "${pp[@]}" --set parallel.pp_schedule=zb-h1 --set parallel.pp_split=2
  expect_one_error "cnn selective" "use train.recompute = full" "$bin/dtrain" train "${common[@]}" \
    --set train.recompute=selective --run-dir "$work/cnn_selective"
else
  echo "note: Debian's dataset-fashion-mnist is not installed ($fashion): the CNN part is skipped"
fi
expect_one_error "bad value" "train.recompute = some (--set) is not allowed: use one of none|selective|full" \
  "$bin/dtrain" train "${transformer[@]}" --set train.recompute=some --run-dir "$work/bad"
echo "PASS: recompute selective and full keep every layout's trajectory bit for bit, with less memory planned"
