#!/usr/bin/env bash
# Saving before a job's end, without SLURM: SIGUSR1, SIGUSR1 again and SIGTERM mid-run (checkpoints
# every step, so they may land in a save) stop the run with exit 79 and a checkpoint; `--resume auto`
# then ends on the uninterrupted run's weights, byte for byte, and a finished run is not started
# again. Two ranks started by hand, only rank 1 signalled: both stop after the same step. A deadline
# (train.stop_before, DTRAIN_JOB_END_TIME) that has passed stops the run before its first step, one
# mid-run stops it after a step. Bad input: a requeued job whose run dir is gone, a run dir of
# another config, a bad train.stop_before.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to read the metrics"
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=64 --set model.heads=4
  --set model.layers=1 --set model.ff_dim=128 --set model.seq_len=32 --set data.stride=32 --set train.batch_size=8
  --set train.epochs=20 --set train.max_steps=400 --set train.progress=false --set train.eval_max_batches=2 --set train.threads=1
  --set train.log_every=1 --set parallel.timeout_s=60)
logged() {  # $1 = run dir, $2 = steps: whether its metrics.jsonl holds that many steps yet
  [ "$(grep -c '"type": *"train"' "$1/metrics.jsonl" 2>/dev/null)" -ge "$2" ] 2>/dev/null
}
run_auto() {  # $1 = name: `--resume auto` into $work/NAME, its output appended to $work/NAME.out; returns its status
  local name=$1; shift
  "$bin/dtrain" train "${common[@]}" --resume auto "$@" --run-dir "$work/$name" >>"$work/$name.out" 2>&1
}
start_auto() {  # as run_auto, in the background: the process's pid in $job (and $pids)
  local name=$1; shift
  "$bin/dtrain" train "${common[@]}" --resume auto "$@" --run-dir "$work/$name" >>"$work/$name.out" 2>&1 &
  job=$!
  pids+=("$job")
}
identical() {  # $1, $2 = run dirs: byte-identical model_final
  cmp -s "$work/$1/model_final/model.safetensors" "$work/$2/model_final/model.safetensors" ||
    fail "$2 ended on other weights than $1"
}

# The uninterrupted run.
run_one straight

# 1. Three signals mid-run, one process, a checkpoint every step.
start_auto signalled --set train.checkpoint_every=1
wait_for 60 logged "$work/signalled" 100 || fail "the run did not get going"
kill -USR1 "$job"
kill -USR1 "$job" 2>/dev/null || true  # the run may be gone already: it stops within a step
kill -TERM "$job" 2>/dev/null || true
rc=0; wait "$job" || rc=$?
[ $rc -eq 79 ] || { cat "$work/signalled.out"; fail "signalled run: exit $rc, expected 79"; }
line=$(grep "^stopping: SIGUSR1" "$work/signalled.out") || { cat "$work/signalled.out"; fail "no 'stopping: SIGUSR1' line"; }
step=$(sed -n 's/.*saved the checkpoint of step \([0-9]*\) in [0-9.]* s.*/\1/p' <<<"$line")
[ -n "$step" ] && [ "$step" -lt 400 ] || fail "the stop line names no step before the end: $line"
[ -d "$(ck "$work/signalled" "$step")" ] || fail "no checkpoint of step $step"
[ ! -e "$work/signalled/summary.json" ] && [ ! -e "$work/signalled/model_final" ] ||
  fail "a stopped run wrote summary.json or model_final"
echo "ok  signals: $line"
run_auto signalled --set train.checkpoint_every=1 || { cat "$work/signalled.out"; fail "the resumed run failed"; }
grep -q "resumed from $work/signalled/checkpoints/step_$(printf %09d "$step")" "$work/signalled.out" ||
  fail "the second run did not resume from step $step"
identical straight signalled
before=$(stat -c %Y "$work/signalled/model_final/model.safetensors")
run_auto signalled --set train.checkpoint_every=1 || fail "a finished run's --resume auto failed"
tail -n 1 "$work/signalled.out" | grep -q "its run is finished (summary.json): nothing to do" ||
  fail "a finished run was not recognised: $(tail -n 1 "$work/signalled.out")"
[ "$(stat -c %Y "$work/signalled/model_final/model.safetensors")" = "$before" ] || fail "a finished run was run again"
echo "ok  resumed to the uninterrupted weights; a finished run is left alone"

# 2. Two ranks by hand, only rank 1 signalled: both stop after the same step, then go on.
port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
two_ranks() {  # starts ranks 0 and 1 into $work/two (outputs two0.out, two1.out); pids in rank_pids
  rank_pids=()
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      DTRAIN_JOB_TOKEN=stop OMP_NUM_THREADS=1 "$bin/dtrain" train "${common[@]}" --set train.batch_size=4 \
      --resume auto --run-dir "$work/two" >>"$work/two$r.out" 2>&1 &
    rank_pids+=($!)
    pids+=($!)
  done
}
run_ranks straight2 2 --set train.batch_size=4
two_ranks
wait_for 60 logged "$work/two" 50 || fail "the two ranks did not get going"
kill -USR1 "${rank_pids[1]}"
rc0=0 rc1=0
wait "${rank_pids[0]}" || rc0=$?
wait "${rank_pids[1]}" || rc1=$?
[ $rc0 -eq 79 ] && [ $rc1 -eq 79 ] || { cat "$work/two0.out" "$work/two1.out"; fail "ranks exited $rc0 and $rc1, expected 79"; }
grep -q "^stopping: another rank's signal or deadline; saved the checkpoint of step" "$work/two0.out" ||
  { cat "$work/two0.out"; fail "rank 0 did not say it stopped for another rank"; }
two_ranks
wait "${rank_pids[0]}" || fail "rank 0 of the resumed pair failed"
wait "${rank_pids[1]}" || fail "rank 1 of the resumed pair failed"
grep -q "resumed from" "$work/two0.out" || fail "the pair did not resume"
identical straight2 two
echo "ok  one rank signalled: both stopped after the same step and resumed to the uninterrupted weights"

# 3. Deadlines: passed before the first step (nothing to save), then passed mid-run (a longer run).
long=(--set train.max_steps=1500 --set train.stop_before=1)
run_one straight_long --set train.max_steps=1500
rc=0
DTRAIN_JOB_END_TIME=$(($(date +%s) + 30)) run_auto deadline "${long[@]}" || rc=$?
[ $rc -eq 79 ] && grep -q "^stopping before the first step: train.stop_before: 1 min before the job's end; nothing new" \
  "$work/deadline.out" || { cat "$work/deadline.out"; fail "a passed deadline: exit $rc"; }
[ ! -d "$work/deadline/checkpoints" ] || [ -z "$(ls "$work/deadline/checkpoints")" ] || fail "a stop before the first step saved"
rc=0
DTRAIN_JOB_END_TIME=$(($(date +%s) + 62)) run_auto deadline "${long[@]}" || rc=$?
[ $rc -eq 79 ] && grep -q "^stopping: train.stop_before: 1 min before the job's end; saved the checkpoint" \
  "$work/deadline.out" || { cat "$work/deadline.out"; fail "a deadline mid-run: exit $rc"; }
grep -q "the job ends at .*, so the run saves and stops after the first step that ends past" "$work/deadline.out" ||
  fail "the run did not say when it would stop"
run_auto deadline "${long[@]}" || { cat "$work/deadline.out"; fail "going on after the deadline failed"; }
grep -q "note: train.stop_before = 1 is set, but not in a SLURM job" "$work/deadline.out" ||
  fail "no note that no end time is known"
identical straight_long deadline
echo "ok  deadlines: before the first step, mid-run, then the run's end on the uninterrupted weights"

# 4. Bad input: one line each, nothing lost.
expect_one_error "requeued, run dir gone" "holds no run: it was removed" \
  env SLURM_RESTART_COUNT=1 "$bin/dtrain" train "${common[@]}" --resume auto --run-dir "$work/gone"
[ ! -e "$work/gone" ] || fail "the refused run created its run dir"
expect_one_error "another config" "holds a run of another config (train.lr (0.001 there, 0.003 here))" \
  "$bin/dtrain" train "${common[@]}" --resume auto --set train.checkpoint_every=1 --set train.lr=0.003 \
  --run-dir "$work/signalled"
identical straight signalled
expect_one_error "bad stop_before" "train.stop_before = -1" \
  "$bin/dtrain" train "${common[@]}" --set train.stop_before=-1 --run-dir "$work/bad"
echo "PASS: runs stop before their job's end, save, and go on with --resume auto to the same weights"
