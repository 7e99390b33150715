#!/usr/bin/env bash
# Where dtrun's store listens without --standalone: an endpoint on 127.0.0.1 binds loopback only
# (one node, and node rank 0 of several nodes on one machine), not every address; SIGTERM stops
# an agent that waits in the rendezvous for a node that never comes.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to pick a free port"
command -v ss >/dev/null || { echo "SKIP: no ss (iproute2) to list listening sockets"; exit 77; }

free_port() { "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_for() {  # $1 = seconds, then a command that must succeed
  local t=$1; shift
  for _ in $(seq $((t * 10))); do "$@" && return 0; sleep 0.1; done
  return 1
}
listening() { ss -ltnpH | grep "pid=$1," | awk '{print $4}' | sort; }  # local address:port of pid $1
has_listener() { [ -n "$(listening "$1")" ]; }
gone() { ! kill -0 "$1" 2>/dev/null; }

# $1 = name, then dtrun options; checks that dtrun listens on 127.0.0.1:PORT and nothing else,
# then stops it with SIGTERM.
check() {
  local name=$1 port agent addr rc=0; shift
  port=$(free_port)
  "$bin/dtrun" "$@" --rdzv-endpoint "127.0.0.1:$port" --rdzv-timeout 600 sleep 600 >"$work/$name.out" 2>&1 &
  agent=$!
  wait_for 60 has_listener "$agent" || { cat "$work/$name.out"; kill -9 "$agent"; fail "$name: dtrun never listened"; }
  addr=$(listening "$agent")
  kill -TERM "$agent"
  wait_for 60 gone "$agent" || { kill -9 "$agent"; fail "$name: dtrun did not stop within 60 s of SIGTERM"; }
  wait "$agent" || rc=$?
  [ "$addr" = "127.0.0.1:$port" ] || fail "$name: dtrun listens on '$addr', expected 127.0.0.1:$port only"
  [ "$rc" -eq 143 ] || { cat "$work/$name.out"; fail "$name: dtrun exited $rc after SIGTERM, expected 143"; }
  echo "$name: listened on $addr only; stopped by SIGTERM"
}

check one_node --nproc-per-node 1
check node0_waiting --nnodes 2 --node-rank 0 --nproc-per-node 1  # node 1 never comes
grep -q "stopped by signal 15" "$work/node0_waiting.out" || { cat "$work/node0_waiting.out"; fail "no signal report"; }
echo "PASS: dtrun on 127.0.0.1 listens on loopback only"
