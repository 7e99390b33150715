#!/usr/bin/env bash
# dtrun: a worker killed with SIGKILL stops the others within seconds and dtrun exits non-zero
# naming the rank; SIGINT to dtrun stops every worker; with --max-restarts 1 the group restarts,
# resumes from the latest checkpoint and ends with the same weights as an uninterrupted run;
# usage errors (a missing program too) are one line with status 2; a one-node run does not report
# its rendezvous and a failed rank's lines are not printed twice; torchrun's log and rendezvous
# options work.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to compare weights"
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=64
  --set model.heads=4 --set model.layers=2 --set model.ff_dim=256 --set model.seq_len=32
  --set data.stride=32 --set train.batch_size=8 --set train.threads=1 --set train.log_every=1
  --set train.progress=false --set train.eval_max_batches=2)

lines() { [ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ]; }

# 1. SIGKILL one of three workers mid-training.
"$bin/dtrun" --standalone --nproc-per-node 3 "$bin/dtrain" train "${common[@]}" --set train.max_steps=100000 \
  --set train.epochs=0 --run-dir "$work/kill" >"$work/kill.out" 2>&1 &
agent=$!
wait_for 60 lines "$work/kill/metrics.jsonl" 3 || { cat "$work/kill.out"; fail "training did not start"; }
victim=$(worker_pid "$agent" 1)
[ -n "$victim" ] || fail "no worker with RANK=1 under dtrun"
others=$(pgrep -P "$agent" | grep -vx "$victim")
kill -9 "$victim"
t0=${EPOCHREALTIME/./}
rc=0; wait "$agent" || rc=$?
ms=$(( (${EPOCHREALTIME/./} - t0) / 1000 ))
echo "dtrun exited $rc, $ms ms after the kill"
[ "$rc" -ne 0 ] || fail "dtrun exited 0 after a worker was killed"
[ "$ms" -lt 15000 ] || fail "dtrun took $ms ms to stop the job"
grep -q "dtrun: error: rank 1 (local rank 1 on node 0, pid $victim) was killed by signal 9 (SIGKILL" "$work/kill.out" ||
  { cat "$work/kill.out"; fail "dtrun did not name the killed rank"; }
for p in $others; do ! kill -0 "$p" 2>/dev/null || fail "worker $p still runs after dtrun exited"; done

# 2. SIGINT to dtrun stops the workers at once and is reported (SIGTERM and SIGUSR1, which let the
#    workers save a checkpoint first: test_dtrun_signals.sh).
"$bin/dtrun" --standalone --nproc-per-node 2 "$bin/dtrain" train "${common[@]}" --set train.max_steps=100000 \
  --set train.epochs=0 --run-dir "$work/term" >"$work/term.out" 2>&1 &
agent=$!
wait_for 60 lines "$work/term/metrics.jsonl" 2 || { cat "$work/term.out"; fail "training did not start"; }
kids=$(pgrep -P "$agent")
kill -INT "$agent"
rc=0; wait "$agent" || rc=$?
[ "$rc" -eq 130 ] || { cat "$work/term.out"; fail "dtrun exited $rc after SIGINT, expected 130"; }
grep -q "dtrun: stopped by signal 2 (SIGINT)" "$work/term.out" || { cat "$work/term.out"; fail "no signal report"; }
for p in $kids; do ! kill -0 "$p" 2>/dev/null || fail "worker $p still runs after SIGINT to dtrun"; done

# 3. --max-restarts 1: kill rank 1 after the step-20 checkpoint; the restarted group resumes and
#    ends where an uninterrupted run ends.
restart=(--set train.max_steps=200 --set train.epochs=0 --set train.checkpoint_every=20)
"$bin/dtrun" --standalone --nproc-per-node 2 "$bin/dtrain" train "${common[@]}" "${restart[@]}" \
  --run-dir "$work/straight" >"$work/straight.out" 2>&1 || { cat "$work/straight.out"; fail "uninterrupted run failed"; }
restart_after_kill "000000[0-1][0-9]0" --nproc-per-node 2 "$bin/dtrain" train "${common[@]}" "${restart[@]}" \
  --set train.keep_checkpoints=10

# 4. Usage errors.
out=$("$bin/dtrun" --nproc-per-node 2 2>&1) && fail "dtrun without a program succeeded"
[[ "$out" == "dtrun: error: no program to run"* ]] || fail "unexpected message: $out"
out=$("$bin/dtrun" --nnodes 2 --rdzv-endpoint 127.0.0.1:1 true 2>&1) && fail "--nnodes 2 without a node rank succeeded"
[[ "$out" == *"needs --node-rank"* ]] || fail "unexpected message: $out"
# A missing program is one line before any rendezvous (a path, or a name not on PATH).
for prog in /nonexistent/program "nosuch-prog-$$"; do
  rc=0; out=$("$bin/dtrun" --standalone --nproc-per-node 2 "$prog" 2>&1) || rc=$?
  [ "$rc" -eq 2 ] || fail "dtrun with the missing program $prog exited $rc, expected 2: $out"
  [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "expected one line for the missing program $prog, got: $out"
  [[ "$out" == "dtrun: error: program $prog not found"*"build/bin/dtrain" ]] || fail "unexpected message: $out"
done
# 5. Said once: a one-node run prints no rendezvous line; a failed rank's last lines are repeated
#    only when they were not forwarded tagged (--only-ranks filtered them, or --no-tag).
fails='echo "line of $RANK"; if [ "$RANK" = 1 ]; then echo "boom-$$" >&2; exit 3; fi; sleep 30'
once() {  # $1 = name, then dtrun's options; the job must fail with rank 1's status
  local name=$1 rc=0; shift
  "$bin/dtrun" --standalone --nproc-per-node 2 "$@" bash -c "$fails" >"$work/$name.out" 2>&1 || rc=$?
  [ "$rc" -eq 1 ] || { cat "$work/$name.out"; fail "$name: dtrun exited $rc, expected 1"; }
  ! grep -q "rendezvous" "$work/$name.out" || { cat "$work/$name.out"; fail "$name: a one-node run reported its rendezvous"; }
  [ "$(grep -c "boom-" "$work/$name.out")" -eq 1 ] || { cat "$work/$name.out"; fail "$name: rank 1's error line should appear once"; }
}
once tagged
grep -qx "\[1\]: boom-[0-9]*" "$work/tagged.out" || { cat "$work/tagged.out"; fail "tagged: rank 1's line was not forwarded"; }
! grep -q "last output" "$work/tagged.out" || { cat "$work/tagged.out"; fail "tagged: the forwarded lines were repeated"; }
once filtered --only-ranks 0
grep -q "^dtrun: last output of rank 1:" "$work/filtered.out" && grep -qx "    boom-[0-9]*" "$work/filtered.out" ||
  { cat "$work/filtered.out"; fail "filtered: rank 1's last lines were not shown"; }
! grep -q "^\[1\]" "$work/filtered.out" || { cat "$work/filtered.out"; fail "filtered: rank 1's output was forwarded"; }
# 6. torchrun's options: --log-dir with --redirects/--tee per local rank, --local-ranks-filter;
#    --master-addr/--master-port and --rdzv-conf is_host (node rank 1 hosts the store).
"$bin/dtrun" --standalone --nproc-per-node 2 --log-dir "$work/logs" --redirects 0:1 --tee=1:3 --local_ranks_filter 1 \
  bash -c 'echo "out $RANK"; echo "err $RANK" >&2' >"$work/logs.out" 2>&1 || { cat "$work/logs.out"; fail "logs: dtrun failed"; }
logs=$work/logs/attempt_0
[ "$(cat "$logs/rank_0/stdout.log")" = "out 0" ] && [ "$(cat "$logs/rank_1/stdout.log")" = "out 1" ] &&
  [ "$(cat "$logs/rank_1/stderr.log")" = "err 1" ] && [ ! -e "$logs/rank_0/stderr.log" ] ||
  { find "$work/logs" -type f; fail "logs: the log files do not hold what --redirects/--tee chose"; }
grep -qx "\[1\]: out 1" "$work/logs.out" && grep -qx "\[1\]: err 1" "$work/logs.out" && ! grep -q "^\[0\]" "$work/logs.out" ||
  { cat "$work/logs.out"; fail "logs: the console should show local rank 1's lines only"; }
port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
node=(--nnodes 2 --nproc-per-node 1 --master-addr 127.0.0.1 --master-port "$port" --rdzv-timeout 60)
say_rank='echo "rank $RANK of $WORLD_SIZE as $ROLE_NAME"'
"$bin/dtrun" "${node[@]}" --node-rank 1 --rdzv-conf is_host=true --role trainer bash -c "$say_rank" >"$work/host.out" 2>&1 &
host=$!
pids+=("$host")
"$bin/dtrun" "${node[@]}" --node_rank=0 --rdzv_conf=is_host=false,last_call_timeout=5 --role trainer bash -c "$say_rank" \
  >"$work/guest.out" 2>&1 || { cat "$work/guest.out"; fail "is_host: node rank 0 failed"; }
rc=0; wait "$host" || rc=$?
[ "$rc" -eq 0 ] || { cat "$work/host.out"; fail "is_host: node rank 1 (the store's host) exited $rc"; }
grep -qx "\[1\]: rank 1 of 2 as trainer" "$work/host.out" && grep -qx "\[0\]: rank 0 of 2 as trainer" "$work/guest.out" ||
  { cat "$work/host.out" "$work/guest.out"; fail "is_host: the ranks are not numbered node by node"; }
grep -q "rendezvous 'none' complete: 2 node(s), 2 workers, store at 127.0.0.1:$port" "$work/host.out" ||
  { cat "$work/host.out"; fail "is_host: the store's host did not report the rendezvous"; }
grep -q "note: --rdzv-conf last_call_timeout has no meaning" "$work/guest.out" || { cat "$work/guest.out"; fail "no note"; }
echo "PASS: kill, SIGINT, restart with resume, usage errors, said once, torchrun's options"
