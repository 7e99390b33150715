#!/usr/bin/env bash
# Without dtrun: `mpirun dtrain train` (OpenMPI's variables) and two processes given torchrun's
# variables by hand (rank 0 hosts the TCP store; or a file store in a shared folder) train data
# parallel and end with the weights of one rank on the whole batch; a wrong job token keeps a
# process out with one clear line.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to compare weights"
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=64
  --set model.heads=4 --set model.layers=1 --set model.ff_dim=128 --set model.seq_len=32
  --set data.stride=32 --set train.max_steps=20 --set train.progress=false --set train.eval_max_batches=2
  --set optim.name=sgd --set optim.momentum=0.9 --set train.lr=0.05 --set optim.warmup_steps=0
  --set parallel.timeout_s=30)
"$bin/dtrain" train "${common[@]}" --set train.batch_size=16 --set train.threads=2 --run-dir "$work/single" \
  >"$work/single.out" 2>&1 || { cat "$work/single.out"; fail "single run failed"; }
port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# torchrun-style variables, set by hand: rank 0 hosts the store at MASTER_PORT.
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    DTRAIN_JOB_TOKEN=manual OMP_NUM_THREADS=1 "$bin/dtrain" train "${common[@]}" --set train.batch_size=8 \
    --run-dir "$work/manual" >"$work/manual$r.out" 2>&1 &
  eval "pid$r=$!"
done
wait "$pid0" || { cat "$work/manual0.out"; fail "manual rank 0 failed"; }
wait "$pid1" || { cat "$work/manual1.out"; fail "manual rank 1 failed"; }
grep -q "rank 0 of 2 (local 0 of 2, node 0) via torchrun-style variables" "$work/manual0.out" ||
  { cat "$work/manual0.out"; fail "rank 0 did not report its place"; }
[ ! -s "$work/manual1.out" ] || { cat "$work/manual1.out"; fail "rank 1 printed something"; }
"$py" "$src/tests/python/compare_weights.py" "$work/single/model_final" "$work/manual/model_final" 1e-5 \
  "torchrun variables vs 1 rank" || fail "manual 2-rank run differs"

# The same through a file store in a shared folder (DTRAIN_STORE_DIR) instead of TCP.
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 DTRAIN_STORE_DIR="$work/store" DTRAIN_JOB_TOKEN=files OMP_NUM_THREADS=1 \
    "$bin/dtrain" train "${common[@]}" --set train.batch_size=8 --run-dir "$work/files" >"$work/files$r.out" 2>&1 &
  eval "pid$r=$!"
done
wait "$pid0" || { cat "$work/files0.out"; fail "file-store rank 0 failed"; }
wait "$pid1" || { cat "$work/files1.out"; fail "file-store rank 1 failed"; }
"$py" "$src/tests/python/compare_weights.py" "$work/single/model_final" "$work/files/model_final" 1e-5 \
  "file store vs 1 rank" || fail "file-store 2-rank run differs"

# mpirun: OpenMPI's variables (as root it needs --allow-run-as-root; two slots on a 2-core box).
if command -v mpirun >/dev/null; then
  mpirun --allow-run-as-root --oversubscribe -np 2 -x OMP_NUM_THREADS=1 -x MASTER_PORT=$((port + 1)) \
    "$bin/dtrain" train "${common[@]}" --set train.batch_size=8 --run-dir "$work/mpi" >"$work/mpi.out" 2>&1 ||
    { cat "$work/mpi.out"; fail "mpirun run failed"; }
  grep -q "via OpenMPI" "$work/mpi.out" || { cat "$work/mpi.out"; fail "mpirun ranks did not detect OpenMPI"; }
  "$py" "$src/tests/python/compare_weights.py" "$work/single/model_final" "$work/mpi/model_final" 1e-5 \
    "mpirun vs 1 rank" || fail "mpirun run differs"
else
  echo "note: mpirun not installed; the OpenMPI path is covered by the unit tests only"
fi

# A process with another job's token is refused by rank 0's store and says so.
port2=$((port + 2))
RANK=0 WORLD_SIZE=2 MASTER_PORT=$port2 DTRAIN_JOB_TOKEN=right "$bin/dtrain" train "${common[@]}" \
  --set parallel.timeout_s=5 --run-dir "$work/tok" >"$work/tok0.out" 2>&1 &
host=$!
set +e
RANK=1 WORLD_SIZE=2 MASTER_PORT=$port2 DTRAIN_JOB_TOKEN=wrong "$bin/dtrain" train "${common[@]}" \
  --set parallel.timeout_s=5 --run-dir "$work/tok" >"$work/tok1.out" 2>&1
rc=$?
wait "$host"; rc0=$?
set -e
[ "$rc" -eq 2 ] || { cat "$work/tok1.out"; fail "the intruder exited $rc, expected 2"; }
grep -q "refused this process: wrong job token" "$work/tok1.out" || { cat "$work/tok1.out"; fail "no token message"; }
[ "$rc0" -eq 2 ] && grep -q "rank(s) 1 did not join" "$work/tok0.out" ||
  { cat "$work/tok0.out"; fail "rank 0 did not name the rank that never joined"; }
echo "PASS: torchrun variables (TCP and file store), mpirun, job token"
