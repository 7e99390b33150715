#!/usr/bin/env bash
# srun --mpi=pmix with parallel.backend = mpi under a real SLURM (the private loopback cluster of
# slurm_lib.sh): examples/slurm/multi_node_mpi.sbatch with 2 tasks gets its ranks from PMIx, trains
# over MPI and ends with the weights of one process on the whole batch; plain srun (no PMIx) with
# parallel.backend = mpi stops with one line naming srun --mpi=pmix.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to compare weights"
source "$src/tests/e2e/slurm_lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: OpenMPI is not installed (openmpi-bin)"; exit 77; }
[ -f "$bin/../lib/libdtrain_mpi.so" ] ||
  { echo "SKIP: this build has no MPI backend (no lib/libdtrain_mpi.so): install libopenmpi-dev and build again"; exit 77; }
cluster=$work/slurm
trap 'slurm_stop "$cluster"; rm -rf "$work"' EXIT
slurm_start "$cluster" 4 || fail "could not start the private SLURM cluster"
srun --mpi=list 2>&1 | grep -qw pmix || { echo "SKIP: this SLURM has no pmix plugin (srun --mpi=list)"; exit 77; }

args=(--set data.dir="$work/data" --set model.dim=64 --set model.heads=4 --set model.layers=1
  --set model.ff_dim=128 --set model.seq_len=32 --set data.stride=32 --set train.max_steps=20
  --set train.progress=false --set train.eval_max_batches=2 --set optim.name=sgd --set optim.momentum=0.9
  --set train.lr=0.05 --set optim.warmup_steps=0 --set parallel.timeout_s=60)
"$bin/dtrain" train --config "$src/configs/quickstart.toml" "${args[@]}" --set train.batch_size=16 \
  --set train.threads=2 --run-dir "$work/single" >"$work/single.out" 2>&1 || { cat "$work/single.out"; fail "single run failed"; }
port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

export DTRAIN_BIN=$bin DTRAIN_SRC=$src CONFIG=$src/configs/quickstart.toml OMP_NUM_THREADS=1 MASTER_PORT=$port RUN_DIR=$work/mpi
export EXTRA_ARGS="${args[*]} --set train.batch_size=8"
slurm_run_batch "$cluster" "$src/examples/slurm/multi_node_mpi.sbatch" --nodes=1 --ntasks-per-node=2 ||
  { slurm_job_output "$cluster"; fail "the MPI batch job failed"; }
slurm_job_output "$cluster" >"$work/mpi.out"
for want in "data parallel: rank 0 of 2 (local 0 of 2, node 0) via SLURM" "collectives over MPI (Open MPI" "Test loss"; do
  grep -qF "$want" "$work/mpi.out" || { cat "$work/mpi.out"; fail "the MPI job's output lacks '$want'"; }
done
"$py" "$src/tests/python/compare_weights.py" "$work/single/model_final" "$work/mpi/model_final" 1e-5 \
  "srun --mpi=pmix over MPI vs 1 rank" || fail "the MPI job ended with other weights"
echo "ok  srun --mpi=pmix trains over MPI and ends with one process's weights"

# Without PMIx the ranks are SLURM's but not MPI's: one line, saying how to launch.
rc=0
MASTER_PORT=$((port + 1)) timeout 120 srun --mpi=none --kill-on-bad-exit=1 -n 2 "$bin/dtrain" train \
  --config "$src/configs/quickstart.toml" "${args[@]}" --set parallel.backend=mpi --run-dir "$work/bad" \
  >"$work/bad.out" 2>&1 || rc=$?
[ "$rc" -ne 0 ] || fail "parallel.backend = mpi under srun without PMIx was accepted"
grep -qF "dtrain: error: parallel.backend = mpi needs ranks that an MPI launcher started, and this process was started by SLURM: launch with \`mpirun -np N dtrain train ...\` or \`srun --mpi=pmix dtrain train ...\`" \
  "$work/bad.out" || { cat "$work/bad.out"; fail "srun without PMIx did not say how to launch"; }
echo "PASS: srun --mpi=pmix over MPI reproduces one process; srun without PMIx is refused with the fix"
