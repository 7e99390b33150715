#!/usr/bin/env bash
# What dtrun's nodes must agree on, and what it does not restart. A node given a slower heartbeat than
# the host's keeps the host's (said in a note) and is not declared lost; a worker's configuration error
# (a typo key, a tensor-parallel size the workers cannot hold) stops the job at once, with its one
# line, instead of burning the restarts.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to pick a free port"
port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
node=(--nnodes 2 --nproc-per-node 1 --master-addr 127.0.0.1 --master-port "$port" --rdzv-timeout 60 --stop-timeout 1)
"$bin/dtrun" "${node[@]}" --node-rank 0 --rdzv-conf keep_alive_interval=1,keep_alive_max_attempt=2 \
  bash -c 'sleep 8' >"$work/host.out" 2>&1 & host=$!
pids+=("$host")
rc=0
"$bin/dtrun" "${node[@]}" --node-rank 1 --rdzv-conf keep_alive_interval=20 bash -c 'sleep 8' >"$work/slow.out" 2>&1 ||
  rc=$?
rc_host=0; wait "$host" || rc_host=$?
[ $rc = 0 ] && [ $rc_host = 0 ] || { cat "$work/host.out" "$work/slow.out"; fail "a healthy node was lost ($rc_host, $rc)"; }
grep -q "note: this node beats every 1 s, as the host's --rdzv-conf keep_alive_interval=1" "$work/slow.out" ||
  { cat "$work/slow.out"; fail "the node did not say it takes the host's heartbeat"; }
! grep -q "keep_alive.*ignored" "$work/host.out" "$work/slow.out" || fail "keep_alive_* said ignored, yet applied"
echo "ok  a node given keep_alive_interval=20 beats at the host's 1 s; the 8 s job ends well"

# An elastic job turns away a joiner with other workers per node or another command; the job goes on.
port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
el=(--nnodes 1:2 --rdzv-endpoint "127.0.0.1:$port" --rdzv-id terms --rdzv-conf last_call_timeout=0 --rdzv-timeout 30)
"$bin/dtrun" "${el[@]}" --nproc-per-node 1 --node-rank 0 bash -c 'sleep 10' >"$work/el.out" 2>&1 & host=$!
pids+=("$host")
sleep 1  # the host's store is up (a joiner would wait for it anyway)
turned_away() {  # NAME NEEDLE, then the joiner's dtrun options and command
  local name=$1 needle=$2; shift 2
  rc=0; timeout 20 "$bin/dtrun" "${el[@]}" "$@" >"$work/$name.out" 2>&1 || rc=$?
  [ $rc != 0 ] && grep -q "dtrun: error: this node cannot join the elastic job 'terms': $needle" "$work/$name.out" ||
    { cat "$work/el.out" "$work/$name.out"; fail "$name: not turned away (exit $rc)"; }
  echo "ok  $name: $(grep "dtrun: error" "$work/$name.out" | cut -c1-160)"
}
turned_away "other workers per node" "it has --nproc-per-node 2 and the job's nodes 1" \
  --nproc-per-node 2 bash -c 'sleep 10'
turned_away "another command" "its worker command differs" --nproc-per-node 1 bash -c 'sleep 7'
rc=0; wait "$host" || rc=$?
[ $rc = 0 ] || { cat "$work/el.out"; fail "the elastic job failed after turning nodes away ($rc)"; }
[ "$(grep -c "dtrun: turned away node" "$work/el.out")" = 2 ] || { cat "$work/el.out"; fail "the host did not say it"; }

common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=32 --set model.heads=2
  --set model.layers=1 --set model.ff_dim=64 --set model.seq_len=16 --set train.batch_size=8 --set data.stride=16
  --set train.threads=1 --set train.progress=false --set train.max_steps=2)
final() {  # NAME NEEDLE, then extra arguments for dtrain train: one start, no restart, the error once
  local name=$1 needle=$2; shift 2
  rc=0
  timeout 120 "$bin/dtrun" --standalone --nproc-per-node 2 --max-restarts 3 --monitor-interval 0.05 \
    "$bin/dtrain" train "${common[@]}" "$@" --run-dir "$work/$name" >"$work/$name.out" 2>&1 || rc=$?
  [ $rc = 1 ] || { cat "$work/$name.out"; fail "$name: dtrun exited $rc, expected 1"; }
  grep -q "not restarted: a worker stopped on a configuration error" "$work/$name.out" &&
    ! grep -q "restarting all workers" "$work/$name.out" || { cat "$work/$name.out"; fail "$name: restarted"; }
  [ "$(grep -c "dtrain: error: .*$needle" "$work/$name.out")" = 1 ] ||
    { cat "$work/$name.out"; fail "$name: the error should be said once"; }
  echo "ok  $name: $(grep "dtrain: error: " "$work/$name.out" | cut -c1-150)"
}
final "typo key" "unknown config key 'train.lrr'" --set train.lrr=1
final "tp that does not fit" "parallel.tp" --set parallel.tp=4
# Errors every rank finds alike are said once (rank 0), also those of the data and the threads.
cp -r "$work/data" "$work/cut" && truncate -s -7 "$work/cut/valid.bin"
final "a truncated token file" "valid.bin" --set data.dir="$work/cut"
if [ "$(nproc)" -ge 2 ]; then
  rc=0
  OMP_NUM_THREADS=2 timeout 120 "$bin/dtrun" --standalone --nproc-per-node 2 --bind cores --max-restarts 1 \
    "$bin/dtrain" train "${common[@]}" --set train.threads=0 --run-dir "$work/bind" >"$work/bind.out" 2>&1 || rc=$?
  [ $rc = 1 ] && [ "$(grep -c "dtrain: error: OMP_NUM_THREADS = 2 is more than the 1 CPUs" "$work/bind.out")" = 1 ] ||
    { cat "$work/bind.out"; fail "--bind cores with OMP_NUM_THREADS=2: not one line (exit $rc)"; }
  echo "ok  --bind cores with OMP_NUM_THREADS=2: said once"
fi
echo "PASS: the host's heartbeat rule on every node; configuration errors are not restarted"
