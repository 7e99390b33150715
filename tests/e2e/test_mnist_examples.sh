#!/usr/bin/env bash
# The MNIST exercise's batch scripts (examples/mnist/*.sbatch) under a real SLURM (a private 4-CPU
# cluster on loopback, tests/e2e/slurm_lib.sh), on a tiny CNN and IDX files made here: each job runs
# 4 ranks started by srun with batch GLOBAL_BATCH / 4 per rank, and ends with the weights of one
# process trained with the whole global batch (dropout on): the README's "same global batch, same
# numbers". Then examples/mnist/classify_with_pytorch.py classifies images as `dtrain predict` does
# (when PyTorch is installed).
source "$2/tests/e2e/lib.sh" "$1" "$2" "to write IDX files and compare weights"
source "$src/tests/e2e/slurm_lib.sh"

# 600 train and 100 test images of 28×28, labels 0-9 (a seeded pattern a CNN can learn a little of)
"$py" "$src/tests/python/seeded_images.py" "$work/idx" 600 100 || fail "could not write the IDX files"
"$bin/dtrain" data prepare --format idx --input "$work/idx" --out "$work/mnist" --valid-count 100 >/dev/null ||
  fail "could not prepare the IDX files"

tiny=(--set data.dir="$work/mnist" --set "model.channels=4,8" --set model.hidden=16 --set train.max_steps=12
  --set train.progress=false --set optim.name=sgd --set optim.momentum=0.9 --set train.lr=0.05
  --set parallel.timeout_s=60)
"$bin/dtrain" train --config "$src/configs/mnist-cnn.toml" "${tiny[@]}" --set train.batch_size=16 \
  --set train.threads=1 --run-dir "$work/one" >"$work/one.out" 2>&1 || { cat "$work/one.out"; fail "one process failed"; }

cluster=$work/slurm
trap 'slurm_stop "$cluster"; cleanup' EXIT
slurm_start "$cluster" 4 || fail "could not start the private SLURM cluster"
export DTRAIN_BIN=$bin CONFIG=$src/configs/mnist-cnn.toml GLOBAL_BATCH=16 EXTRA_ARGS="${tiny[*]}"
submit() {  # $1 = name, $2 = script, then sbatch options
  local name=$1 script=$2; shift 2
  RUN_DIR=$work/$name slurm_run_batch "$cluster" "$src/examples/mnist/$script" "$@" ||
    { slurm_job_output "$cluster"; fail "job $name ($script) failed"; }
  slurm_job_output "$cluster" >"$work/$name.out"
}
submit one_node mnist_one_node.sbatch
submit two_nodes mnist_two_nodes.sbatch --nodes=1  # one node here: 4 tasks, the script as written
for name in one_node two_nodes; do
  for want in "batch 4 per rank (global 16)" "data parallel: rank 0 of 4 (local 0 of 4, node 0) via SLURM" \
    "Test loss: .*, test accuracy: "; do
    grep -q "$want" "$work/$name.out" || { cat "$work/$name.out"; fail "$name: no line '$want'"; }
  done
  same_weights one "$name" 1e-5
done
# a global batch the tasks do not divide: one line, before any rank starts
GLOBAL_BATCH=10 RUN_DIR=$work/bad slurm_run_batch "$cluster" "$src/examples/mnist/mnist_one_node.sbatch" &&
  fail "GLOBAL_BATCH=10 over 4 tasks was accepted"
slurm_job_output "$cluster" >"$work/bad.out"
grep -q "GLOBAL_BATCH=10 is not a multiple of the job's 4 tasks" "$work/bad.out" ||
  { cat "$work/bad.out"; fail "GLOBAL_BATCH=10: no line saying why"; }
echo "ok  the batch scripts train 4 ranks with the one-process weights"

# PyTorch classifies as dtrain predict does
if "$py" -c "import torch" 2>/dev/null; then
  "$bin/dtrain" ckpt export "$work/one/model_final" --out "$work/one.safetensors" >/dev/null
  "$bin/dtrain" predict --checkpoint "$work/one/model_final" --input "$work/idx/t10k-images-idx3-ubyte" \
    >"$work/dtrain.pred" || fail "dtrain predict failed"
  "$py" "$src/examples/mnist/classify_with_pytorch.py" "$work/one.safetensors" --count 0 \
    --data-json "$work/one/model_final/data.json" --images "$work/idx/t10k-images-idx3-ubyte" >"$work/torch.pred" ||
    fail "classify_with_pytorch.py failed"
  [ "$(wc -l <"$work/torch.pred")" = 100 ] || fail "classify_with_pytorch.py printed $(wc -l <"$work/torch.pred") lines"
  cmp -s <(cut -d' ' -f1-2 "$work/dtrain.pred") <(cut -d' ' -f1-2 "$work/torch.pred") ||
    { diff <(cut -d' ' -f1-2 "$work/dtrain.pred") <(cut -d' ' -f1-2 "$work/torch.pred") | head; fail "PyTorch's classes differ"; }
  echo "ok  classify_with_pytorch.py: the classes of dtrain predict for all 100 images"
else
  echo "(PyTorch not installed: classify_with_pytorch.py not checked)"
fi
echo PASS
