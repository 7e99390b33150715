#!/usr/bin/env bash
# parallel.backend = mpi end to end, ranks started by `mpirun`: DDP 2, FSDP 2, TP 2, PP 2 (1f1b) and
# 3D PP 2 × FSDP 2 × TP 2 (8 ranks) each end 30 steps (dropout on) with the weights of one process with the same
# global batch under SGD-momentum (relative 1e-5), as test_ddp/fsdp/tp/pp hold Gloo to; FSDP 4 in
# bf16 with bf16 gradient reduction ends bit for bit where the same run over Gloo does (the backends
# must round alike and add in the same order). The choices that cannot work (mpi
# without an MPI launcher, nccl on the CPU, an unknown name, no MPI plugin) are one line each. The
# programs link no MPI library (the plugin does).
source "$2/tests/e2e/lib.sh" "$1" "$2" "to compare weights"
for p in dtrain dtrun test_collectives; do
  ! ldd "$bin/$p" | grep -Eq 'lib(mpi|open-rte|open-pal)\.' || fail "$p links an MPI library: $(ldd "$bin/$p" | grep -E 'mpi|open-')"
done
command -v mpirun >/dev/null || { echo "SKIP: mpirun is not installed (openmpi-bin)"; exit 77; }
[ -f "$bin/../lib/libdtrain_mpi.so" ] ||
  { echo "SKIP: this build has no MPI backend (no lib/libdtrain_mpi.so): install libopenmpi-dev and build again"; exit 77; }
steps=30
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=64
  --set model.heads=4 --set model.layers=2 --set model.ff_dim=128 --set model.seq_len=32
  --set model.activation=gelu --set data.stride=32 --set train.max_steps=$steps --set train.log_every=1
  --set train.progress=false --set train.eval_max_batches=2 --set model.dropout=0.1 --set optim.name=sgd
  --set optim.momentum=0.9 --set train.lr=0.05 --set optim.warmup_steps=0 --set train.checkpoint_every=0)
free_port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# N ranks started by mpirun (as root it needs --allow-run-as-root; more ranks than the 2 cores here
# need --oversubscribe), one thread each, collectives over MPI.
mpi_ranks() {  # $1 = name, $2 = ranks, then extra arguments
  local name=$1 n=$2; shift 2
  mpirun --allow-run-as-root --oversubscribe -np "$n" -x OMP_NUM_THREADS=1 -x MASTER_PORT="$(free_port)" \
    "$bin/dtrain" train "${common[@]}" --set parallel.backend=mpi --set train.threads=1 "$@" \
    --run-dir "$work/$name" >"$work/$name.out" 2>&1 || { cat "$work/$name.out"; fail "run $name failed"; }
}
tp2=(--set parallel.tp=2 --set parallel.dp_replicate=1)
pp2=(--set parallel.pp=2 --set parallel.dp_replicate=1 --set parallel.pp_schedule=1f1b --set parallel.microbatches=4)
run_one single --set train.batch_size=16 --set train.threads=2
mpi_ranks ddp2 2 --set train.batch_size=8
mpi_ranks fsdp2 2 --set train.batch_size=8 --set parallel.dp_shard=2
mpi_ranks tp2 2 --set train.batch_size=16 "${tp2[@]}"
mpi_ranks pp2 2 --set train.batch_size=16 "${pp2[@]}"
mpi_ranks pp2_fsdp2_tp2 8 --set train.batch_size=8 "${pp2[@]}" --set parallel.dp_shard=2 --set parallel.tp=2
for r in ddp2 fsdp2 tp2 pp2 pp2_fsdp2_tp2; do same_weights single $r 1e-5; done
"$py" "$src/tests/python/compare_losses.py" "$work" "$steps" single:ddp2:1e-5 single:fsdp2:1e-5 single:tp2:1e-5 \
  single:pp2:1e-5 single:pp2_fsdp2_tp2:1e-5 || fail "a run over MPI has other losses than one process"
grep -q "^mesh: pp 2 × dp_replicate 1 × dp_shard 2 × tp 2 (8 ranks, tp fastest; collectives over MPI (Open MPI" \
  "$work/pp2_fsdp2_tp2.out" || { cat "$work/pp2_fsdp2_tp2.out"; fail "the 3D run did not say its collectives run over MPI"; }
grep -q "data parallel: rank 0 of 2 (local 0 of 2, node 0) via OpenMPI" "$work/ddp2.out" ||
  { cat "$work/ddp2.out"; fail "ddp2 did not report its place"; }
echo "ok  DDP, FSDP, TP, PP and 3D over MPI end with one process's weights"

# bf16 gradients reduce-scattered in bf16 over 4 ranks: both backends run the same ring with the
# same rounding (comm/reduce_math.hpp), so the runs end on the same weights bit for bit.
bf16=(--set train.batch_size=4 --set parallel.dp_shard=4 --set train.precision=bf16 --set parallel.fsdp_reduce_dtype=bf16)
mpi_ranks fsdp4_bf16 4 "${bf16[@]}"
run_ranks fsdp4_bf16_gloo 4 "${bf16[@]}" --set train.threads=1
same_weights fsdp4_bf16_gloo fsdp4_bf16 0
echo "ok  FSDP 4 in bf16 over MPI ends bit for bit where Gloo does"

# Choices that cannot work, one line each.
expect_one_error "mpi without an MPI launcher" "parallel.backend = mpi needs ranks that an MPI launcher started, and this process was started alone: launch with \`mpirun -np N dtrain train ...\` or \`srun --mpi=pmix dtrain train ...\`" \
  "$bin/dtrain" train "${common[@]}" --set parallel.backend=mpi --run-dir "$work/bad"
expect_one_error "nccl on the CPU" "parallel.backend = nccl needs a CUDA device (train.device = cuda)" \
  "$bin/dtrain" train "${common[@]}" --set parallel.backend=nccl --run-dir "$work/bad"
expect_one_error "an unknown backend" "parallel.backend" \
  "$bin/dtrain" train "${common[@]}" --set parallel.backend=ucx --run-dir "$work/bad"
grep -qF "use one of auto|gloo|nccl|mpi" "$work/case.err" || fail "the unknown backend's line does not list the choices"
rc=0
DTRAIN_MPI_PLUGIN="$work/none/libdtrain_mpi.so" mpirun --allow-run-as-root --oversubscribe -np 2 \
  -x MASTER_PORT="$(free_port)" "$bin/dtrain" train "${common[@]}" --set parallel.backend=mpi \
  --run-dir "$work/bad" >"$work/noplugin.out" 2>&1 || rc=$?
[ "$rc" -ne 0 ] || fail "a missing MPI plugin was not noticed"
grep -qF "dtrain: error: parallel.backend = mpi needs the MPI library, and $work/none/libdtrain_mpi.so cannot be loaded" \
  "$work/noplugin.out" || { cat "$work/noplugin.out"; fail "a missing MPI plugin is not one line naming it"; }
echo "PASS: DDP, FSDP, TP, PP and 3D over MPI reproduce one process; bf16 as Gloo; refusals named"
