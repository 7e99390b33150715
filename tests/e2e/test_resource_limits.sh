#!/usr/bin/env bash
# Settings and files that ask for more than the machine has end in one `dtrain: error:` line, never a
# crash or a flood: thread counts past the CPUs (train.threads, OMP_NUM_THREADS, --threads), pipeline
# shapes past the bounds (flags and a schedule file's header), a memory limit (ulimit -v) at every
# size from "too small to plan" to "just enough", and a token file truncated under a running job.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to write a schedule file"
d=$bin/dtrain
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=32
  --set model.heads=2 --set model.layers=1 --set model.ff_dim=64 --set model.seq_len=16
  --set train.batch_size=16 --set data.stride=16 --set train.progress=false --set train.eval_max_batches=2)
cpus=$(nproc)
# outcome WHAT RC ERR LIMIT: a run under a limit either ran (rc 0: prints "ran") or ended with one
# `dtrain: error:` line in ERR naming LIMIT (rc 2: prints "refused"); anything else fails the test.
outcome() {
  local what=$1 rc=$2 err=$3 limit=$4
  if [ "$rc" -eq 0 ]; then echo ran; return; fi
  [ "$rc" -eq 2 ] || fail "$what: exit $rc (a crash?): $(tail -3 "$err")"
  [ "$(wc -l <"$err")" -eq 1 ] && grep -q "^dtrain: error: .*$limit" "$err" ||
    fail "$what: expected one error line naming $limit, saw: $(cat "$err")"
  echo refused
}

# 4. Threads.
expect_one_error "train.threads=100000" "train.threads = 100000 (--set) is outside 0..65536" \
  "$d" train "${common[@]}" --set train.threads=100000 --run-dir "$work/t1"
expect_one_error "train.threads=1000" "train.threads = 1000 is more than the $cpus CPUs" \
  "$d" train "${common[@]}" --set train.threads=1000 --run-dir "$work/t1"
expect_one_error "OMP_NUM_THREADS=100000" "OMP_NUM_THREADS = 100000 is more than the $cpus CPUs" \
  env OMP_NUM_THREADS=100000 "$d" train "${common[@]}" --run-dir "$work/t2"
[ ! -e "$work/t2/config.json" ] || fail "a refused thread count should stop the run before it writes anything"
expect_one_error "eval --threads 100000" "--threads = 100000 is more than the $cpus CPUs" \
  "$d" eval --checkpoint "$work/none" --threads 100000
expect_one_error "eval --threads 4294967297 (not cut to 32 bits)" "--threads 4294967297 is outside 0..2147483648" \
  "$d" eval --checkpoint "$work/none" --threads 4294967297

# 5. Pipeline shapes: flags and a file's header are bounded before anything is made.
expect_one_error "plan --pp 1000 --microbatches 100000" "--microbatches 100000 is outside 1..4096" \
  "$d" plan --pp 1000 --microbatches 100000 --schedule 1f1b
expect_one_error "plan --pp 1000 --microbatches 4096" "more than the 131072 a schedule may hold" \
  "$d" plan --pp 1000 --microbatches 4096 --schedule 1f1b
printf 'pp 2\nmicrobatches 1000000\nrank 0: 0F0\nrank 1: 1F0\n' >"$work/huge.txt"
expect_one_error "plan --file with microbatches 1000000" "huge.txt: micro-batches 1000000 is outside 1..4096" \
  "$d" plan --file "$work/huge.txt"
rc=0
"$bin/dtrun" --standalone --nproc-per-node 2 "$d" train "${common[@]}" --set parallel.pp=2 --set train.threads=1 \
  --set parallel.pp_schedule_file="$work/huge.txt" --run-dir "$work/pp" >"$work/pp.out" 2>&1 || rc=$?
[ $rc -ne 0 ] && [ "$(grep -c "dtrain: error: .*huge.txt: micro-batches 1000000 is outside 1..4096" "$work/pp.out")" -eq 1 ] ||
  fail "train with that file under dtrun: expected a failure and the error said once, saw rc $rc: $(cat "$work/pp.out")"
echo "ok  train with that file: $(grep "dtrain: error" "$work/pp.out" | cut -c1-150)"
# A list where every action is missing: a few problems and a count, not millions of lines.
printf 'pp 2\nmicrobatches 4096\nrank 0:\nrank 1:\n' >"$work/empty.txt"
rc=0
"$d" plan --file "$work/empty.txt" >"$work/empty.out" 2>"$work/empty.err" || rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$work/empty.err")" -le 22 ] && grep -q "more problems (the first 20 are listed)" "$work/empty.err" ||
  fail "plan of an empty 4096-micro-batch list: expected exit 2 and at most 22 lines, saw rc $rc, $(wc -l <"$work/empty.err") lines"
echo "ok  plan of a list missing every action: $(wc -l <"$work/empty.err") lines"

# 6. A memory limit (ulimit -v) at every size from "cannot even plan" to "enough": each run either
# trains or ends with one `dtrain: error:` line naming the limit; never a signal or an internal error.
outcomes=""
for mib in 100 120 140 160 180 200 210 220 230 240 260 300; do
  rc=0
  (ulimit -v $((mib * 1024)); exec "$d" train "${common[@]}" --set model.dim=128 --set train.batch_size=64 \
    --set train.threads=1 --set train.max_steps=2 --run-dir "$work/as$mib") >"$work/as.out" 2>"$work/as.err" || rc=$?
  outcomes+=" $mib:$(outcome "ulimit -v $mib MiB" $rc "$work/as.err" "ulimit -v")"
done
[[ $outcomes == *refused* && $outcomes == *ran* ]] || fail "the sweep should span refusals and runs, saw:$outcomes"
echo "ok  ulimit -v sweep (MiB):$outcomes"
# Two ranks under dtrun at a limit too small (150 MiB: below every single-rank run of the sweep, so
# not at the border, where thread arenas make it vary): a rank's line names it, and the job stops.
rc=0
(ulimit -v $((150 * 1024)); exec "$bin/dtrun" --standalone --nproc-per-node 2 "$d" train "${common[@]}" \
  --set train.threads=1 --set train.max_steps=2 --run-dir "$work/as_dtrun") >"$work/asd.out" 2>&1 || rc=$?
[ $rc -ne 0 ] && grep -q "dtrain: error: .*ulimit -v" "$work/asd.out" && grep -q "dtrun: error: the job failed" "$work/asd.out" ||
  fail "2 ranks at ulimit -v 150 MiB: expected the limit named and the job stopped, saw rc $rc: $(cat "$work/asd.out")"
echo "ok  2 ranks at ulimit -v 150 MiB: $(grep -m1 "dtrain: error" "$work/asd.out" | cut -c1-140)"

# Out of file descriptors while resuming (ulimit -n): the limit is named, and no checkpoint is taken
# for damaged (none is moved aside, none is skipped for an older one).
"$d" train "${common[@]}" --set train.threads=1 --set train.max_steps=4 --set train.checkpoint_every=2 \
  --run-dir "$work/fd" >"$work/fd.out" 2>&1 || { cat "$work/fd.out"; fail "the run to resume failed"; }
outcomes=""
for n in 5 6 7 8 9 10 11 12 14 16 20; do
  cp -r "$work/fd" "$work/fd$n"
  rc=0
  (ulimit -n $n; exec "$d" train --resume "$work/fd$n" --set train.max_steps=5) >"$work/fdn.out" 2>"$work/fdn.err" || rc=$?
  ! grep -q "is damaged\|newest good" "$work/fdn.err" "$work/fdn.out" && [ ! -e "$work/fd$n/abandoned" ] ||
    fail "ulimit -n $n: a checkpoint was taken for damaged: $(cat "$work/fdn.err")"
  [ $rc -ne 0 ] || grep -q "resumed from $(ck "$work/fd$n" 4)" "$work/fdn.out" || fail "ulimit -n $n: should resume step 4"
  outcomes+=" $n:$(outcome "ulimit -n $n" $rc "$work/fdn.err" "ulimit -n")"
done
[[ $outcomes == *refused* && $outcomes == *ran* ]] || fail "the sweep should span refusals and resumes, saw:$outcomes"
echo "ok  ulimit -n sweep on resume:$outcomes"

# 7. A token file truncated under a running job: one line naming it, exit 2 (not SIGBUS).
cp -r "$work/data" "$work/live"
"$d" train "${common[@]}" --set data.dir="$work/live" --set train.threads=1 --set train.epochs=1000 \
  --run-dir "$work/live_run" >"$work/live.out" 2>"$work/live.err" &
job=$!
pids+=("$job")
wait_for 60 grep -q '^model: ' "$work/live.out" || { cat "$work/live.out" "$work/live.err"; fail "the job did not start"; }
truncate -s 32 "$work/live/train.bin"
rc=0; wait "$job" || rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$work/live.err")" -eq 1 ] &&
  grep -qF "dtrain: error: token file $work/live/train.bin was truncated or replaced while this job read it" "$work/live.err" ||
  fail "truncated train.bin: expected exit 2 and one line naming it, saw rc $rc: $(cat "$work/live.err")"
echo "ok  train.bin truncated under the job: $(cut -c1-160 "$work/live.err")"
echo PASS
