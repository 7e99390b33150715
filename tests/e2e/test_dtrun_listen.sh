#!/usr/bin/env bash
# Where stores listen: dtrun's without --standalone, for an endpoint on 127.0.0.1, binds loopback only
# (one node, and node rank 0 of several nodes on one machine), not every address, and so does rank
# 0's own store (no dtrun) for MASTER_ADDR=127.0.0.1; SIGTERM stops an agent that waits in the
# rendezvous for a node that never comes, or for node 0 to listen (status 79: nothing to save).
source "$2/tests/e2e/lib.sh" "$1" "$2" "to pick a free port"
command -v ss >/dev/null || { echo "SKIP: no ss (iproute2) to list listening sockets"; exit 77; }

free_port() { "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
listening() { ss -ltnpH | grep "pid=$1," | awk '{print $4}' | sort; }  # local address:port of pid $1
has_listener() { [ -n "$(listening "$1")" ]; }
gone() { ! kill -0 "$1" 2>/dev/null; }

# $1 = name, $2 = dtrun's exit status expected after SIGTERM (143: its worker `sleep` died of the
# SIGTERM forwarded to it; 79: no worker ran yet), then dtrun options; checks that dtrun listens on
# 127.0.0.1:PORT and nothing else, then stops it with SIGTERM.
check() {
  local name=$1 expect=$2 port agent addr rc=0; shift 2
  port=$(free_port)
  "$bin/dtrun" "$@" --rdzv-endpoint "127.0.0.1:$port" --rdzv-timeout 600 sleep 600 >"$work/$name.out" 2>&1 &
  agent=$!
  wait_for 60 has_listener "$agent" || { cat "$work/$name.out"; kill -9 "$agent"; fail "$name: dtrun never listened"; }
  addr=$(listening "$agent")
  kill -TERM "$agent"
  wait_for 60 gone "$agent" || { kill -9 "$agent"; fail "$name: dtrun did not stop within 60 s of SIGTERM"; }
  wait "$agent" || rc=$?
  [ "$addr" = "127.0.0.1:$port" ] || fail "$name: dtrun listens on '$addr', expected 127.0.0.1:$port only"
  [ "$rc" -eq "$expect" ] || { cat "$work/$name.out"; fail "$name: dtrun exited $rc after SIGTERM, expected $expect"; }
  echo "$name: listened on $addr only; stopped by SIGTERM"
}

check one_node 143 --nproc-per-node 1
check node0_waiting 79 --nnodes 2 --node-rank 0 --nproc-per-node 1  # node 1 never comes
grep -q "stopped by signal 15 (SIGTERM) while no worker ran" "$work/node0_waiting.out" ||
  { cat "$work/node0_waiting.out"; fail "no signal report"; }

# A node of rank 1 whose node 0 never comes (nothing listens at the endpoint) stops on SIGTERM too,
# instead of retrying its connection until --rdzv-timeout (with nothing to save: 79).
port=$(free_port)
"$bin/dtrun" --nnodes 2 --node-rank 1 --nproc-per-node 1 --rdzv-endpoint "127.0.0.1:$port" --rdzv-timeout 600 \
  sleep 600 >"$work/node1.out" 2>&1 &
agent=$!
sleep 1
kill -TERM "$agent"
wait_for 10 gone "$agent" || { kill -9 "$agent"; fail "node 1 waiting for node 0 did not stop within 10 s of SIGTERM"; }
rc=0
wait "$agent" || rc=$?
[ "$rc" -eq 79 ] || { cat "$work/node1.out"; fail "node 1: dtrun exited $rc after SIGTERM, expected 79"; }
grep -q "stopped by signal 15 (SIGTERM) while no worker ran" "$work/node1.out" || { cat "$work/node1.out"; fail "node 1: no signal report"; }
echo "node1_connecting: stopped by SIGTERM while waiting for node 0"

# Without dtrun, rank 0 hosts the store where MASTER_ADDR points (127.0.0.1: loopback only).
port=$(free_port)
RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port DTRAIN_JOB_TOKEN=listen \
  "$bin/dtrain" train --config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set parallel.timeout_s=600 \
  --run-dir "$work/rank0" >"$work/rank0.out" 2>&1 &
rank0=$!
pids+=("$rank0")
wait_for 60 has_listener "$rank0" || { cat "$work/rank0.out"; fail "rank 0 never listened"; }
addr=$(listening "$rank0")
kill -9 "$rank0"
[ "$addr" = "127.0.0.1:$port" ] || fail "rank 0 with MASTER_ADDR=127.0.0.1 listens on '$addr', expected 127.0.0.1:$port only"
echo "rank0_without_dtrun: listened on $addr only"
echo "PASS: stores for 127.0.0.1 listen on loopback only; every agent stops on SIGTERM"
