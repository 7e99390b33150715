#!/usr/bin/env bash
# dtrun and signals, with stand-in workers (bash): SIGUSR1/SIGTERM are forwarded to every worker, which
# saves for longer than --stop-timeout and exits 79, and dtrun waits, exits 79 without a restart with
# its one line; workers that exit 79 unsignalled make it 79 too (on two nodes, both); in a rendezvous
# it exits 79 at once; SIGINT still stops at once (130); --save-timeout stops a worker that never
# exits. Also --log-level (quiet drops an info line, debug shows each worker's environment with the
# token hidden) and the endpoint resolved once (lo, localhost; a name that is neither: one line).
source "$2/tests/e2e/lib.sh" "$1" "$2" "to pick a free port"
free_port() { "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
started() { [ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ]; }  # FILE N: N workers wrote their line
# A worker that saves: on SIGUSR1 or SIGTERM it notes which (and any later one) in $OUT/got, saves for
# $SAVE_S s (the save itself ignores signals) and exits 79.
cat >"$work/saver.sh" <<'SH'
save() {
  trap 'echo "again $RANK" >>"$OUT/got"' USR1 TERM
  echo "$1 $RANK" >>"$OUT/got"
  (trap '' USR1 TERM; exec sleep "$SAVE_S")
  exit 79
}
trap 'save USR1' USR1
trap 'save TERM' TERM
echo "$RANK" >>"$OUT/starts"
while :; do sleep 0.1; done
SH
fast=(--standalone --nproc-per-node 2 --stop-timeout 1 --monitor-interval 0.05)
ms_since() { echo $(( (${EPOCHREALTIME/./} - $1) / 1000 )); }

# 1. SIGUSR1, then SIGTERM 1 s later: both forwarded to both workers; dtrun waits for the 3 s save
#    (not stopping them after --stop-timeout 1), exits 79 and restarts nothing.
mkdir "$work/save"
OUT=$work/save SAVE_S=3 "$bin/dtrun" "${fast[@]}" --max-restarts 2 bash "$work/saver.sh" >"$work/save.out" 2>&1 &
agent=$!; pids+=("$agent")
wait_for 20 started "$work/save/starts" 2 || { cat "$work/save.out"; fail "the workers did not start"; }
t0=${EPOCHREALTIME/./}
kill -USR1 "$agent"; sleep 1; kill -TERM "$agent"
rc=0; wait "$agent" || rc=$?
ms=$(ms_since "$t0")
[ $rc = 79 ] || { cat "$work/save.out"; fail "dtrun exited $rc after SIGUSR1, expected 79"; }
[ "$ms" -ge 2900 ] || { cat "$work/save.out"; fail "dtrun exited $ms ms after SIGUSR1: it did not wait for the 3 s save"; }
[ "$(sort "$work/save/got" | tr '\n' ' ')" = "USR1 0 USR1 1 again 0 again 1 " ] ||
  { cat "$work/save/got"; fail "not every worker got SIGUSR1, then the SIGTERM forwarded again"; }
[ "$(wc -l <"$work/save/starts")" = 2 ] || fail "the workers were restarted: $(wc -l <"$work/save/starts") starts"
[ "$(grep -c "^dtrun: the workers saved a checkpoint and stopped before the time limit (exit 79): requeue" \
  "$work/save.out")" = 1 ] && ! grep -q "error:\|restarting" "$work/save.out" ||
  { cat "$work/save.out"; fail "not the one line of a save, or an error or restart said"; }
echo "ok  SIGUSR1 + SIGTERM: forwarded to both workers, waited $ms ms for the save, exit 79, no restart"

# 2. One worker exits 79 unsignalled (its peers on another node agreed to stop), the other 0: 79.
rc=0
"$bin/dtrun" "${fast[@]}" --max-restarts 1 bash -c '[ "$LOCAL_RANK" = 1 ] && exit 79; sleep 0.3' \
  >"$work/peer.out" 2>&1 || rc=$?
[ $rc = 79 ] && grep -q "the workers saved a checkpoint" "$work/peer.out" && ! grep -q "error:" "$work/peer.out" ||
  { cat "$work/peer.out"; fail "workers exiting 79 and 0: dtrun exited $rc, expected 79 with its line"; }
echo "ok  a worker exiting 79 unsignalled, the other 0: exit 79"

# Two nodes (on loopback) whose workers exit 79 unsignalled, node 1's a second after node 0's: the
# host waits for node 1 before ending the rendezvous, and both exit 79.
port=$(free_port)
two=(--nnodes 2 --nproc-per-node 1 --rdzv-endpoint "127.0.0.1:$port" --rdzv-timeout 30 --stop-timeout 1)
"$bin/dtrun" "${two[@]}" --node-rank 0 bash -c 'sleep 1; exit 79' >"$work/node0.out" 2>&1 &
host=$!; pids+=("$host")
rc1=0; "$bin/dtrun" "${two[@]}" --node-rank 1 bash -c 'sleep 2; exit 79' >"$work/node1.out" 2>&1 || rc1=$?
rc0=0; wait "$host" || rc0=$?
[ "$rc0 $rc1" = "79 79" ] && grep -q "the workers saved a checkpoint" "$work/node0.out" &&
  ! grep -q "error:" "$work/node0.out" "$work/node1.out" ||
  { cat "$work/node0.out" "$work/node1.out"; fail "two nodes saving: exit $rc0 and $rc1, expected 79 and 79"; }
echo "ok  two nodes whose workers exit 79: both exit 79"

# 3. SIGUSR1 while waiting in the rendezvous for a node that never comes: 79 at once, nothing lost.
port=$(free_port)
"$bin/dtrun" --nnodes 2 --node-rank 0 --rdzv-endpoint "127.0.0.1:$port" --rdzv-timeout 60 true \
  >"$work/rdzv.out" 2>&1 &
agent=$!; pids+=("$agent")
sleep 1
t0=${EPOCHREALTIME/./}
kill -USR1 "$agent"
rc=0; wait "$agent" || rc=$?
ms=$(ms_since "$t0")
[ $rc = 79 ] && [ "$ms" -lt 2000 ] && grep -q "stopped by signal 10 (SIGUSR1) while no worker ran .*nothing to save and nothing lost; requeue" "$work/rdzv.out" ||
  { cat "$work/rdzv.out"; fail "SIGUSR1 in the rendezvous: exit $rc after $ms ms, expected 79 at once with its line"; }
echo "ok  SIGUSR1 in the rendezvous: exit 79 after $ms ms"

# 4. SIGINT stops at once: SIGTERM, then SIGKILL after --stop-timeout 1, though the workers would save for 3 s.
mkdir "$work/int"
OUT=$work/int SAVE_S=3 "$bin/dtrun" "${fast[@]}" --max-restarts 2 bash "$work/saver.sh" >"$work/int.out" 2>&1 &
agent=$!; pids+=("$agent")
wait_for 20 started "$work/int/starts" 2 || { cat "$work/int.out"; fail "the workers did not start"; }
t0=${EPOCHREALTIME/./}
kill -INT "$agent"
rc=0; wait "$agent" || rc=$?
ms=$(ms_since "$t0")
[ $rc = 130 ] && [ "$ms" -lt 2500 ] && grep -q "stopped by signal 2 (SIGINT)" "$work/int.out" ||
  { cat "$work/int.out"; fail "SIGINT: exit $rc after $ms ms, expected 130 within --stop-timeout"; }
echo "ok  SIGINT: exit 130 after $ms ms"

# 5. --save-timeout: a worker that takes SIGUSR1 and never exits is stopped 2 s later; a failure, no restart.
rc=0
"$bin/dtrun" "${fast[@]}" --nproc-per-node 1 --max-restarts 1 --save-timeout 2 \
  bash -c 'trap "echo got it" USR1; touch "$0/up"; while :; do sleep 0.1; done' "$work" >"$work/late.out" 2>&1 &
agent=$!; pids+=("$agent")
wait_for 20 test -f "$work/up" || { cat "$work/late.out"; fail "the worker did not start"; }
kill -USR1 "$agent"
wait "$agent" || rc=$?
[ $rc = 1 ] && grep -q "error: 1 worker(s) on node 0 still ran 2 s after signal 10 (SIGUSR1) (--save-timeout); stopping them" \
  "$work/late.out" && ! grep -q "restarting" "$work/late.out" ||
  { cat "$work/late.out"; fail "--save-timeout 2: exit $rc, expected 1 with its line and no restart"; }
echo "ok  --save-timeout: $(grep "error: 1 worker" "$work/late.out" | cut -c1-120)"

# 6. A worker that does not handle SIGTERM dies of it: 143, saying nothing was saved.
rc=0
"$bin/dtrun" "${fast[@]}" --nproc-per-node 1 --max-restarts 1 bash -c 'touch "$0/up2"; exec sleep 30' "$work" \
  >"$work/plain.out" 2>&1 &
agent=$!; pids+=("$agent")
wait_for 20 test -f "$work/up2" || { cat "$work/plain.out"; fail "the worker did not start"; }
kill -TERM "$agent"
wait "$agent" || rc=$?
[ $rc = 143 ] && grep -q "the workers did not save a checkpoint" "$work/plain.out" ||
  { cat "$work/plain.out"; fail "a worker killed by the SIGTERM forwarded: exit $rc, expected 143 with its line"; }
echo "ok  a worker that does not handle SIGTERM: exit 143"

# 7. --log-level: quiet drops the info line of the endpoint resolved (localhost), debug shows each
#    worker's environment with the token hidden; the workers get the level; a bad one is one line.
port=$(free_port)
level_of() { "$bin/dtrun" "$@" --rdzv-endpoint "localhost:$port" bash -c 'echo "level $DTRAIN_LOG_LEVEL"'; }
out=$(level_of 2>&1) || fail "dtrun with localhost failed: $out"
[[ $out == *"dtrun: rendezvous endpoint localhost:$port = 127.0.0.1:$port (resolved once)"* && $out == *"level info"* ]] ||
  fail "info: no resolution line or level: $out"
out=$(DTRAIN_LOG_LEVEL=quiet level_of 2>&1) || fail "dtrun quiet failed: $out"
[ "$out" = "[0]: level quiet" ] || fail "DTRAIN_LOG_LEVEL=quiet: expected only the worker's line, saw: $out"
out=$(DTRAIN_JOB_TOKEN=tok-$$-secret level_of --log-level debug 2>&1) || fail "dtrun debug failed: $out"
[[ $out == *"dtrun: debug: rank 0 (local rank 0) starts: "*"DTRAIN_JOB_TOKEN=<secret> "*"MASTER_ADDR=127.0.0.1 "* &&
   $out == *"dtrun: debug: rank 0 (local rank 0, pid "*") exited with status 0 after "* &&
   $out == *"dtrun: debug: round 0 (agent 1): members node 0 = "* && $out == *"level debug"* ]] ||
  fail "debug: no environment, exit or round line: $out"
[[ $out != *"tok-$$-secret"* ]] || fail "debug printed the job token: $out"
out=$("$bin/dtrun" --log-level loud true 2>&1) && fail "--log-level loud was taken"
[ "$(echo "$out" | wc -l)" = 1 ] && [[ $out == "dtrun: error: --log-level 'loud' is not quiet, info or debug"* ]] ||
  fail "--log-level loud: $out"
echo "ok  --log-level quiet, debug (token hidden), bad value"

# 8. The endpoint: an interface (lo) resolved once, MASTER_ADDR its address; --standalone says nothing
#    of it; a name that is neither an interface nor a host is one line, status 2.
port=$(free_port)
out=$("$bin/dtrun" --rdzv-endpoint "lo:$port" bash -c 'echo "at $MASTER_ADDR:$MASTER_PORT"' 2>&1) ||
  fail "--rdzv-endpoint lo: $out"
[[ $out == *"dtrun: rendezvous endpoint lo:$port = 127.0.0.1:$port (interface lo)"* && $out == *"at 127.0.0.1:$port"* ]] ||
  fail "--rdzv-endpoint lo: $out"
out=$("$bin/dtrun" --standalone true 2>&1) && [ -z "$out" ] || fail "--standalone said: $out"
rc=0; out=$("$bin/dtrun" --rdzv-endpoint "ib9zz:$port" true 2>&1) || rc=$?
[ $rc = 2 ] && [ "$(echo "$out" | wc -l)" = 1 ] &&
  [[ $out == "dtrun: error: --rdzv-endpoint host ib9zz does not resolve here"*"is no network interface of this machine"* ]] ||
  fail "--rdzv-endpoint ib9zz: exit $rc: $out"
# A hosts file that lists ::1 for localhost first (Debian's default, a fresh root's): the store listens
# where the clients connect (127.0.0.1, IPv4 first), not on the resolver's first address. Needs root.
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
  printf '::1 localhost ip6-localhost\n127.0.0.1 localhost\n127.0.0.1 %s\n' "$(hostname)" >"$work/hosts"
  port=$(free_port)
  out=$(unshare -m sh -c 'mount --bind "$1" /etc/hosts && shift && exec "$@"' sh "$work/hosts" \
    timeout 30 "$bin/dtrun" --rdzv-endpoint "localhost:$port" --rdzv-timeout 10 true 2>&1) ||
    fail "localhost with ::1 listed first: $out"
else
  echo "note: not root, so localhost with ::1 listed first is not tried"
fi
echo "ok  endpoint lo and localhost resolved once; ib9zz: one line"
echo "PASS: dtrun forwards SIGUSR1/SIGTERM and exits 79 after the save; SIGINT and --save-timeout stop; log levels; endpoints"
