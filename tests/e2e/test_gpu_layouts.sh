#!/usr/bin/env bash
# Every model kind and what runs at world size 1 on one GPU with NCCL's groups, against the CPU:
# llama (GQA, RoPE, SwiGLU, RMSNorm; dropout on), llama under full recompute, the course's model
# under selective recompute with 2 micro-steps, the CNN (cuDNN; dropout on) — 30 steps each, every
# step's loss within 2e-3 relative of the CPU's (f32). Then ranks sharing the one GPU
# (train.share_gpus), if NCCL accepts two ranks on one GPU: DDP 2, FSDP 2, TP 2 and PP 2 against the
# one-process GPU run (said and skipped if NCCL refuses). Skipped (77) without a GPU.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to compare metrics"
skip_without_gpu --config "$src/configs/quickstart.toml" --set data.dir="$work/data"
steps=(--set train.max_steps=30 --set train.log_every=1 --set train.progress=false --set train.eval_max_batches=2
  --set parallel.backend=auto)
lm=(--set data.dir="$work/data")
images=""
if [ -n "${DTRAIN_TEST_IMAGES:-}" ]; then images=$DTRAIN_TEST_IMAGES
elif [ -d /usr/share/datasets/fashion-mnist ]; then
  "$bin/dtrain" data fashion-mnist --out "$work/fm" >/dev/null && images=$work/fm
fi
run() {  # $1 = name, $2 = device, then arguments
  local name=$1 dev=$2; shift 2
  "$bin/dtrain" train "$@" "${steps[@]}" --set device="$dev" --run-dir "$work/$name.$dev" \
    >"$work/$name.$dev.out" 2>&1 || { cat "$work/$name.$dev.out"; fail "$name on $dev failed"; }
}
close() {  # $1 = name, $2 = reference run, $3 = run, $4 = tolerance: every step's loss
  "$py" - "$work/$2" "$work/$3" "$4" "$1" <<'PY'
import json, sys
a_dir, b_dir, tol, name = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
def losses(d):
    return [r["loss"] for r in map(json.loads, open(f"{d}/metrics.jsonl")) if r["type"] == "train"]
a, b = losses(a_dir), losses(b_dir)
if len(a) != len(b) or not a: sys.exit(f"FAIL: {name}: {len(a)} and {len(b)} steps")
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
print(f"ok  {name}: {len(a)} steps, worst relative loss difference {worst:.2e} (loss {a[0]:.3f} -> {a[-1]:.3f})")
if not worst <= tol: sys.exit(f"FAIL: {name} left the reference by {worst:.2e} (tolerance {tol:.0e})")
PY
}
both() {  # $1 = name, then arguments: on the CPU and the GPU, compared
  local name=$1; shift
  run "$name" cpu "$@"
  run "$name" cuda "$@"
  close "$name" "$name.cpu" "$name.cuda" 2e-3 || fail "$name: the GPU left the CPU's trajectory"
}
both llama --config "$src/configs/llama-tiny.toml" "${lm[@]}" --set model.dropout=0.1
both llama_full_recompute --config "$src/configs/llama-tiny.toml" "${lm[@]}" --set model.dropout=0.1 \
  --set train.recompute=full
both course_selective_accum2 --config "$src/configs/quickstart.toml" "${lm[@]}" --set train.recompute=selective \
  --set train.grad_accum=2 --set train.batch_size=64
if [ -n "$images" ]; then
  both cnn --config "$src/configs/mnist-cnn.toml" --set data.dir="$images"
else
  echo "note: no image data (DTRAIN_TEST_IMAGES, or Debian's dataset-fashion-mnist): the CNN part is skipped"
fi

# Two ranks on the one GPU, if NCCL takes them.
common=(--config "$src/configs/quickstart.toml" "${lm[@]}" "${steps[@]}" --set device=cuda --set train.batch_size=32
  --set train.share_gpus=true)
"$bin/dtrain" train "${common[@]}" --run-dir "$work/one" >"$work/one.out" 2>&1 || { cat "$work/one.out"; fail "one"; }
rc=0
"$bin/dtrun" --standalone --nproc-per-node 2 "$bin/dtrain" train "${common[@]}" --set train.global_batch=32 \
  --run-dir "$work/ddp2" >"$work/ddp2.out" 2>&1 || rc=$?
if [ $rc -ne 0 ]; then
  echo "note: two ranks on one GPU did not run ($(grep -m1 'error:' "$work/ddp2.out" | cut -c1-300 ||
    tail -n1 "$work/ddp2.out")): the layouts of several ranks are left to a machine with 2 GPUs"
  echo PASS
  exit 0
fi
close "DDP 2 on one GPU" one ddp2 2e-3 || fail "DDP 2"
for layout in "fsdp2 --set parallel.dp_shard=2" "tp2 --set parallel.tp=2" \
              "pp2 --set parallel.pp=2 --set parallel.microbatches=4 --set parallel.pp_schedule=1f1b"; do
  set -- $layout
  name=$1; shift
  "$bin/dtrun" --standalone --nproc-per-node 2 "$bin/dtrain" train "${common[@]}" --set train.global_batch=32 "$@" \
    --run-dir "$work/$name" >"$work/$name.out" 2>&1 || { cat "$work/$name.out"; fail "$name on one GPU failed"; }
  close "$name on one GPU" one "$name" 2e-3 || fail "$name"
done
echo PASS
