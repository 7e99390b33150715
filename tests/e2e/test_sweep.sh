#!/usr/bin/env bash
# `dtrain sweep`: what a user can get wrong about a grid is one error line with nothing started or
# written; a 2×2 grid run here makes 4 run dirs named by their values, each trained with its point's
# values and finished; the same command again skips them all; `dtrain report DIR` ranks them by their
# summaries' best validation loss; a failed point does not stop the others, fails the sweep and shows
# as failed; a point stopped by SIGTERM stops the sweep and the same command resumes it. On a private
# SLURM cluster (skipped without SLURM or root) the job array trains the same points to the same
# weights, and a task warned with SIGUSR1 saves, requeues itself and resumes to the uninterrupted weights.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to read sweep.json, configs and summaries"
export OMP_NUM_THREADS=1
cfg=$src/configs/quickstart.toml
small=(--config "$cfg" --set data.dir="$work/data" --set model.heads=2 --set model.layers=1 --set model.ff_dim=64
  --set model.seq_len=16 --set data.stride=16 --set train.batch_size=8 --set train.max_steps=6
  --set train.eval_max_batches=2 --set train.progress=false --set train.threads=1 --set optim.warmup_steps=0)
grid="train.lr=1e-3,3e-2 model.dim=16,32"
names=("lr=1e-3,dim=16" "lr=1e-3,dim=32" "lr=3e-2,dim=16" "lr=3e-2,dim=32")

# What a user can get wrong: one line, exit 2, nothing made.
bad() {  # $1 = case, $2 = needle, $3 = grid, then more arguments
  local name=$1 needle=$2 g=$3; shift 3
  expect_one_error "$name" "$needle" "$bin/dtrain" sweep "${small[@]}" --grid "$g" --out "$work/bad" "$@"
  [ ! -e "$work/bad" ] || fail "$name: the sweep made $work/bad before refusing"
}
bad "unknown key" "unknown config key 'train.lrr'" "train.lrr=1e-3,3e-3"
grep -qF '`dtrain config keys`' "$work/case.err" || fail "unknown key: the line does not point at dtrain config keys"
bad "unknown key, no near one" "dtrain config keys" "train.zzzzzzzz=1"
bad "no =" "--grid entry \`train.lr\` is not key=v1,v2" "train.lr model.dim=16"
bad "no values" "--grid entry \`train.lr=\` has no value" "train.lr="
bad "empty value" "--grid entry \`train.lr=1e-3,,2e-3\` has an empty value" "train.lr=1e-3,,2e-3"
bad "key twice" "--grid names train.lr twice" "train.lr=1e-3 model.dim=16 train.lr=2e-3"
bad "value refused" "sweep point lr=abc,dim=16: train.lr" "train.lr=1e-3,abc model.dim=16"
bad "bad launcher" "--launcher pbs: use local" "train.lr=1e-3" --launcher pbs
expect_one_error "no grid" "missing --grid" "$bin/dtrain" sweep "${small[@]}" --out "$work/bad"
[ ! -e "$work/bad" ] || fail "no grid: the sweep made $work/bad"
# one value per key is a sweep of one point; --dry-run prints its command and writes nothing
"$bin/dtrain" sweep "${small[@]}" --grid "train.lr=1e-3 model.dim=16" --out "$work/bad" --dry-run >"$work/dry.out" ||
  { cat "$work/dry.out"; fail "a one-point dry run failed"; }
grep -q -- "train --config $(realpath "$cfg") --run-dir $work/bad/lr=1e-3,dim=16 --resume auto .*--set train.lr=1e-3 --set model.dim=16$" \
  "$work/dry.out" || { cat "$work/dry.out"; fail "the dry run does not print the point's command"; }
[ ! -e "$work/bad" ] || fail "the local dry run wrote $work/bad"

# A 2×2 grid, here.
sweep=$work/sweep
"$bin/dtrain" sweep "${small[@]}" --grid "$grid" --out "$sweep" >"$work/local.out" 2>&1 ||
  { cat "$work/local.out"; fail "the local sweep failed"; }
[ "$(grep -c ': finished in ' "$work/local.out")" -eq 4 ] || { cat "$work/local.out"; fail "expected 4 finished points"; }
"$py" - "$sweep" "${names[@]}" <<'EOF' || fail "the sweep's run dirs (see above)"
import json, os, sys
sweep, names = sys.argv[1], sys.argv[2:]
dirs = sorted(d for d in os.listdir(sweep) if os.path.isdir(os.path.join(sweep, d)) and d != "status")
if dirs != sorted(names): sys.exit(f"run dirs {dirs}, expected {sorted(names)}")
rec = json.load(open(f"{sweep}/sweep.json"))
if [p["name"] for p in rec["points"]] != names: sys.exit(f"sweep.json points {rec['points']}")
if rec["grid"] != [{"key": "train.lr", "values": ["1e-3", "3e-2"]}, {"key": "model.dim", "values": ["16", "32"]}]:
    sys.exit(f"sweep.json grid {rec['grid']}")
for p in rec["points"]:
    lr, dim = (v.split("=", 1)[1] for v in p["values"])
    cfg = json.load(open(f"{sweep}/{p['name']}/config.json"))
    if abs(cfg["train"]["lr"] - float(lr)) > 1e-6 * float(lr) or cfg["model"]["dim"] != int(dim):
        sys.exit(f"{p['name']}: config.json has lr {cfg['train']['lr']}, dim {cfg['model']['dim']}")
    if json.load(open(f"{sweep}/{p['name']}/summary.json"))["steps"] != 6: sys.exit(f"{p['name']}: not 6 steps")
print("ok  4 run dirs named by their values, each config.json with its point's values, each finished")
EOF

# The same command again: nothing runs.
"$bin/dtrain" sweep "${small[@]}" --grid "$grid" --out "$sweep" >"$work/again.out" 2>&1 ||
  { cat "$work/again.out"; fail "the sweep run again failed"; }
[ "$(grep -c ': finished before, skipped' "$work/again.out")" -eq 4 ] && ! grep -q ': started' "$work/again.out" ||
  { cat "$work/again.out"; fail "the sweep run again did not skip its 4 finished points"; }
echo "ok  the same sweep again skips its 4 finished points"
expect_one_error "another grid" "holds another sweep" "$bin/dtrain" sweep "${small[@]}" --grid "train.lr=1e-3" --out "$sweep"

# The report ranks them by the summaries' best validation loss.
"$bin/dtrain" report "$sweep" >"$work/report.out" 2>&1 || { cat "$work/report.out"; fail "dtrain report DIR failed"; }
[ -s "$sweep/report.html" ] || fail "no $sweep/report.html"
"$py" - "$sweep" "$work/report.out" <<'EOF' || { cat "$work/report.out"; fail "the ranking (see above)"; }
import json, sys
sweep, out = sys.argv[1], sys.argv[2]
lines = [l.split() for l in open(out) if l[:1].isdigit()]
ranked = [l[-1] for l in lines]
best = {n: json.load(open(f"{sweep}/{n}/summary.json"))["best_val_loss"] for n in ranked}
want = sorted(best, key=best.get)
if ranked != want or len(ranked) != 4: sys.exit(f"ranked {ranked}, the summaries' best_val_loss order is {want}")
if any(l[5] != "finished" or l[4] != "6" for l in lines): sys.exit(f"steps or state wrong: {lines}")
html = open(f"{sweep}/report.html").read()
if html.find("id=\"sweep\"") < 0 or html.find("id=\"sweep\"") > html.find("id=\"overview\""):
    sys.exit("report.html lacks the ranking before the overlay")
print("ok  dtrain report DIR ranks the points as their summaries' best validation losses: " + ", ".join(ranked))
EOF

# A point that fails: the next one still runs, the sweep says which failed and exits non-zero.
rc=0
"$bin/dtrain" sweep "${small[@]}" --grid "train.seed=1 data.dir=$work/nowhere,$work/data" --out "$work/partly" \
  >"$work/partly.out" 2>"$work/partly.err" || rc=$?
[ $rc -eq 2 ] && grep -q "failed (exit status 2): dtrain: error: " "$work/partly.out" &&
  grep -q "^dtrain: error: 1 of 2 points failed (seed=1,dir=_" "$work/partly.err" &&
  [ "$(grep -c ': finished in ' "$work/partly.out")" -eq 1 ] ||
  { cat "$work/partly.out" "$work/partly.err"; fail "a failed point: expected exit 2, its line, and the other point run"; }
"$bin/dtrain" report "$work/partly" >"$work/partly_report.out" 2>&1 || fail "the report of a partly failed sweep"
grep -q "failed (exit status 2)" "$work/partly_report.out" && grep -q "^1 .* finished " "$work/partly_report.out" ||
  { cat "$work/partly_report.out"; fail "the report should rank the finished point and show the failed one"; }
echo "ok  a failed point: the other runs, the sweep exits 2 naming it, the report shows it failed"

# A point stopped here (SIGTERM to its run: it saves and exits 79) stops the sweep; the same command
# again resumes it from its checkpoint to the weights of an uninterrupted run.
long=(--grid "train.lr=3e-2" --set train.max_steps=3000)
"$bin/dtrain" sweep "${small[@]}" "${long[@]}" --out "$work/straight" >"$work/straight.out" 2>&1 ||
  { cat "$work/straight.out"; fail "the uninterrupted sweep failed"; }
"$bin/dtrain" sweep "${small[@]}" "${long[@]}" --out "$work/stopped" >"$work/stopped.out" 2>"$work/stopped.err" &
sweeper=$!
pids+=("$sweeper")
wait_for 60 grep -q '"type":"train"' "$work/stopped/lr=3e-2/metrics.jsonl" 2>/dev/null || fail "the point did not start"
kill -TERM "$(pgrep -P "$sweeper")"
rc=0; wait "$sweeper" || rc=$?
[ $rc -eq 2 ] && grep -q "stopped after saving (exit status 79)" "$work/stopped.out" &&
  grep -q "^dtrain: error: the sweep stopped at point lr=3e-2 (exit status 79), 0 of 1 points finished: run the same command again" \
    "$work/stopped.err" || { cat "$work/stopped.out" "$work/stopped.err"; fail "a stopped point should stop the sweep (exit 2)"; }
"$bin/dtrain" sweep "${small[@]}" "${long[@]}" --out "$work/stopped" >"$work/stopped2.out" 2>&1 ||
  { cat "$work/stopped2.out"; fail "the stopped sweep did not go on"; }
grep -q "lr=3e-2: resumed" "$work/stopped2.out" && grep -q "^resumed from .*step_" "$work/stopped/lr=3e-2/train.log" ||
  { cat "$work/stopped2.out"; fail "the point was not resumed from its checkpoint"; }
"$py" "$src/tests/python/compare_weights.py" "$work/straight/lr=3e-2/model_final" "$work/stopped/lr=3e-2/model_final" \
  1e-6 "stopped and resumed vs straight" || fail "the resumed point ended with other weights than the uninterrupted one"
echo "ok  a point stopped by SIGTERM stops the sweep; the same command resumes it to the uninterrupted weights"

# The job array on a private SLURM cluster (skipped without SLURM or root): the same points, the same weights.
source "$src/tests/e2e/slurm_lib.sh"
cluster=$work/slurm
trap 'slurm_stop "$cluster"; rm -rf "$work"' EXIT
slurm_start "$cluster" 4 || fail "could not start the private SLURM cluster"
# wait_array JOB: up to 120 s for the array's tasks to end; a requeued task, which SLURM holds back
# a while (reason BeginTime), is let go at once.
wait_array() {
  local state
  for _ in $(seq 600); do
    state=$(squeue -h -j "$1" -o "%i %T %r" 2>/dev/null)
    [ -n "$state" ] || return 0
    while read -r task st reason; do
      [ "$st:$reason" != PENDING:BeginTime ] || slurm_release_requeued "$task" || true
    done <<<"$state"
    sleep 0.2
  done
  squeue -j "$1"; fail "job array $1 did not end within 120 s"
}
array=$work/array
"$bin/dtrain" sweep "${small[@]}" --grid "$grid" --launcher slurm --out "$array" --sbatch-args "--time=00:10:00" \
  >"$work/array.out" 2>&1 || { cat "$work/array.out"; fail "dtrain sweep --launcher slurm failed"; }
job=$(sed -n 's/^submitted job array \([0-9]*\) .*/\1/p' "$work/array.out")
[ -n "$job" ] || { cat "$work/array.out"; fail "no job id printed"; }
grep -q "squeue -j $job" "$work/array.out" || { cat "$work/array.out"; fail "no squeue line"; }
wait_array "$job"
for n in "${names[@]}"; do
  [ -f "$array/$n/summary.json" ] || { cat "$array"/logs/*.out; fail "array point $n did not finish"; }
  [ "$(cat "$array/status/$n")" = 0 ] || fail "array point $n: status $(cat "$array/status/$n")"
  "$py" "$src/tests/python/compare_weights.py" "$sweep/$n/model_final" "$array/$n/model_final" 1e-6 "$n: slurm vs local" ||
    fail "array point $n ended with other weights than the local sweep's"
done
echo "ok  the job array ($job) trained the 4 points to the local sweep's weights"

# The array's time-limit path: SIGUSR1 to a task's script (SLURM's warning before the limit) reaches
# the run, which saves and exits 79; the task requeues itself, goes on from the checkpoint
# (--resume auto) and ends with the weights of an uninterrupted run (the same point swept here).
"$bin/dtrain" sweep "${small[@]}" "${long[@]}" --launcher slurm --out "$work/requeue" >"$work/requeue.out" 2>&1 ||
  { cat "$work/requeue.out"; fail "dtrain sweep --launcher slurm (requeue) failed"; }
job=$(sed -n 's/^submitted job array \([0-9]*\) .*/\1/p' "$work/requeue.out")
point=$work/requeue/lr=3e-2
wait_for 60 grep -q '"type":"train"' "$point/metrics.jsonl" 2>/dev/null ||
  { cat "$work"/requeue/logs/*.out; fail "the array task did not start training"; }
scancel --signal=USR1 --batch "${job}_0"
wait_for 60 test -e "$work/requeue/status/lr=3e-2" || { cat "$work"/requeue/logs/*.out; fail "no status after SIGUSR1"; }
[ "$(cat "$work/requeue/status/lr=3e-2")" = 79 ] ||
  { cat "$work"/requeue/logs/*.out; fail "the task recorded $(cat "$work/requeue/status/lr=3e-2"), not 79 (saved)"; }
wait_for 30 sh -c "scontrol -o show job ${job}_0 | grep -q 'Restarts=1'" ||
  { scontrol -o show job "${job}_0"; cat "$work"/requeue/logs/*.out; fail "the task was not requeued"; }
wait_array "$job"
[ -f "$point/summary.json" ] && [ "$(cat "$work/requeue/status/lr=3e-2")" = 0 ] ||
  { cat "$work"/requeue/logs/*.out; fail "the requeued task did not finish its point"; }
grep -q "batch script: the run saved before the job's end; requeueing job ${job}_0" "$work"/requeue/logs/*.out || fail "the task's output does not say it requeued"
grep -q "^resumed from $point/checkpoints/step_" "$work"/requeue/logs/*.out ||
  { cat "$work"/requeue/logs/*.out; fail "the requeued task did not go on from the saved checkpoint"; }
"$py" "$src/tests/python/compare_weights.py" "$work/straight/lr=3e-2/model_final" "$point/model_final" 1e-6 \
  "requeued vs straight" || fail "the requeued point ended with other weights than the uninterrupted one"
echo "ok  on SIGUSR1 the task's run saved and exited 79, the task requeued itself and finished with the uninterrupted weights"
echo "PASS: dtrain sweep"
