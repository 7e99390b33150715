#!/usr/bin/env bash
# The GPU batch scripts (examples/slurm/gpu_*.sbatch: the course's 1 GPU, 4 GPUs on a node, 2 nodes
# of 4) under a real SLURM whose node has 4 GPUs by count (no devices): their --gres,
# --gpus-per-node and --cpus-per-task requests are accepted and each starts its ranks (trained on
# the CPU here, DEVICE=cpu); and a node that SLURM gives 4 GPUs while its one rank sees one (a
# stand-in CUDA plugin) warns once of the 3 idle ones.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to compare weights"
source "$src/tests/e2e/slurm_lib.sh"
cluster=$work/slurm
trap 'slurm_stop "$cluster"; rm -rf "$work"' EXIT
TEST_SLURM_GPUS=4 slurm_start "$cluster" 4 || fail "could not start the private SLURM cluster"

export DTRAIN_BIN=$bin DTRAIN_SRC=$src CONFIG=$src/configs/quickstart.toml OMP_NUM_THREADS=1 DEVICE=cpu
export EXTRA_ARGS="--set data.dir=$work/data --set model.dim=32 --set model.heads=2 --set model.layers=1
  --set model.ff_dim=64 --set model.seq_len=16 --set data.stride=16 --set train.max_steps=5
  --set train.batch_size=8 --set train.progress=false --set train.eval_max_batches=1"
submit() {  # $1 = name, $2 = script, then sbatch options
  local name=$1 script=$2; shift 2
  RUN_DIR=$work/$name slurm_run_batch "$cluster" "$src/examples/slurm/$script" "$@" ||
    { slurm_job_output "$cluster"; fail "job $name ($script) failed"; }
  slurm_job_output "$cluster" >"$work/$name.out"
}
expect() {  # $1 = name, $2 = pattern
  grep -q -- "$2" "$work/$1.out" || { cat "$work/$1.out"; fail "$1: output lacks '$2'"; }
}
submit one gpu_1.sbatch --cpus-per-task=1
expect one "^device: cpu$"
expect one "Test loss"
submit node gpu_1node.sbatch --cpus-per-task=2 --export=ALL,NPROC=2
expect node "^\[0\]: data parallel: rank 0 of 2 (local 0 of 2, node 0) via dtrun"
submit nodes gpu_2nodes.sbatch --nodes=1 --ntasks-per-node=2 --gpus-per-node=2 --cpus-per-task=1
expect nodes "data parallel: rank 0 of 2 (local 0 of 2, node 0) via SLURM"
for name in one node nodes; do expect "$name" "Test loss"; done
echo "ok  gpu_1, gpu_1node (dtrun, 2 ranks) and gpu_2nodes (srun, 2 ranks) accepted and trained"

# SLURM gives the node 4 GPUs; the one rank sees one (a stand-in plugin): one warning, 3 idle.
rc=0
DEVICE=auto DTRAIN_CUDA_PLUGIN=$bin/../lib/libdtrain_standin_cuda.so DTRAIN_STANDIN_GPUS=1 RUN_DIR=$work/idle \
  slurm_run_batch "$cluster" "$src/examples/slurm/gpu_1.sbatch" --cpus-per-task=1 --gres=gpu:4 || rc=$?
slurm_job_output "$cluster" >"$work/idle.out"
[ $rc -ne 0 ] || fail "the stand-in's GPU cannot train"
[ "$(grep -c 'dtrain: warning: .*idle' "$work/idle.out")" -eq 1 ] || { cat "$work/idle.out"; fail "no idle warning"; }
expect idle "SLURM gives this node 4 GPUs but its 1 rank see 1: 3 idle"
echo "ok  $(grep -o 'SLURM gives.*idle' "$work/idle.out")"
echo PASS
