#!/usr/bin/env bash
# SLURM for real: starts munged + slurmctld + slurmd on loopback (a private 4-CPU cluster), submits
# the example batch scripts (dtrun on one node, dtrun per node, plain srun, an elastic dtrun job
# of 1 to 2 nodes on its one node) with 2 workers each; every job trains, its output shows the
# expected ranks and launcher, and all of them end with the same weights.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to compare weights"
source "$src/tests/e2e/slurm_lib.sh"
cluster=$work/slurm
trap 'slurm_stop "$cluster"; rm -rf "$work"' EXIT
slurm_start "$cluster" 4 || fail "could not start the private SLURM cluster"

export DTRAIN_BIN=$bin DTRAIN_SRC=$src CONFIG=$src/configs/quickstart.toml OMP_NUM_THREADS=1
export EXTRA_ARGS="--set data.dir=$work/data --set model.dim=64 --set model.heads=4 --set model.layers=1
  --set model.ff_dim=128 --set model.seq_len=32 --set data.stride=32 --set train.max_steps=20
  --set train.batch_size=8 --set train.progress=false --set train.eval_max_batches=2 --set optim.name=sgd
  --set optim.momentum=0.9 --set train.lr=0.05 --set optim.warmup_steps=0 --set parallel.timeout_s=60"
submit() {  # $1 = name, $2 = script, then sbatch options
  local name=$1 script=$2; shift 2
  RUN_DIR=$work/$name slurm_run_batch "$cluster" "$src/examples/slurm/$script" "$@" ||
    { slurm_job_output "$cluster"; fail "job $name ($script) failed"; }
  slurm_job_output "$cluster" >"$work/$name.out"
}
submit dtrun_one one_node.sbatch --export=ALL,NPROC=2
submit dtrun_nodes multi_node_dtrun.sbatch --nodes=1 --export=ALL,NPROC=2
submit srun multi_node_srun.sbatch --nodes=1 --ntasks-per-node=2
free_port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
submit elastic elastic.sbatch --nodes=1 \
  --export=ALL,NPROC=2,MIN_NODES=1,MAX_NODES=2,GLOBAL_BATCH=16,LAST_CALL=1,PORT="$free_port"

expect() {  # $1 = name, $2 = pattern
  grep -q -- "$2" "$work/$1.out" || { cat "$work/$1.out"; fail "$1: output lacks '$2'"; }
}
expect dtrun_one "^\[0\]: data parallel: rank 0 of 2 (local 0 of 2, node 0) via dtrun"
expect dtrun_one "^\[0\]: workers: $(hostname): ranks 0-1"
expect dtrun_nodes "^\[0\]: data parallel: rank 0 of 2 (local 0 of 2, node 0) via dtrun"
! grep -q "rendezvous '[0-9]*' complete" "$work/dtrun_nodes.out" ||
  { cat "$work/dtrun_nodes.out"; fail "dtrun_nodes: a one-node run reported its rendezvous"; }
expect dtrun_nodes "^\[0\]: data parallel: rank 0 of 2"
expect srun "data parallel: rank 0 of 2 (local 0 of 2, node 0) via SLURM"
expect srun "workers: $(hostname): ranks 0-1"
expect elastic "^\[0\]: global batch 16 = 2 data-parallel ranks × 8 samples × 1 micro-step"
for name in dtrun_one dtrun_nodes srun elastic; do expect "$name" "Test loss"; done
for name in dtrun_nodes srun elastic; do
  "$py" "$src/tests/python/compare_weights.py" "$work/dtrun_one/model_final" "$work/$name/model_final" 1e-5 \
    "$name vs dtrun_one" || fail "$name ended with other weights"
done
echo "PASS: the example batch scripts train under a real SLURM"
