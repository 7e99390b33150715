#!/usr/bin/env bash
# dtrun killed with SIGKILL takes its workers with it (they get SIGKILL when their agent dies) and
# no step or checkpoint is written after; a plain `dtrain train` whose parent shell is killed keeps
# running (only dtrun's children are tied to their parent).
source "$2/tests/e2e/lib.sh" "$1" "$2" "for the shared setup"
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=64
  --set model.heads=4 --set model.layers=2 --set model.ff_dim=256 --set model.seq_len=32
  --set data.stride=32 --set train.batch_size=8 --set train.threads=1 --set train.log_every=1
  --set train.progress=false --set train.eval_max_batches=2 --set train.max_steps=1000000
  --set train.epochs=0 --set train.checkpoint_every=5 --set train.keep_checkpoints=1000)

lines() { [ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ]; }
# A process that runs (a zombie waiting for a reaper does not count).
alive() { [ -r "/proc/$1/stat" ] && [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" != Z ]; }
none_alive() { local p; for p in "$@"; do ! alive "$p" || return 1; done; }
progress() { echo "$(wc -l <"$1/metrics.jsonl") $(ls "$1/checkpoints" 2>/dev/null | wc -l)"; }

# 1. kill -9 dtrun: both workers are gone within seconds and write nothing more.
"$bin/dtrun" --standalone --nproc-per-node 2 "$bin/dtrain" train "${common[@]}" --run-dir "$work/job" \
  >"$work/job.out" 2>&1 &
agent=$!
wait_for 120 lines "$work/job/metrics.jsonl" 3 || { cat "$work/job.out"; fail "training did not start"; }
workers=$(pgrep -P "$agent" | tr '\n' ' ' || true)
[ "$(echo "$workers" | wc -w)" -eq 2 ] || { kill -9 $workers "$agent"; fail "expected 2 workers under dtrun, got: $workers"; }
kill -9 "$agent"
wait "$agent" 2>/dev/null || true
if ! wait_for 10 none_alive $workers; then
  kill -9 $workers 2>/dev/null || true
  fail "workers $workers still run 10 s after dtrun was killed with SIGKILL"
fi
before=$(progress "$work/job")
sleep 2  # a worker that escaped would keep logging a step every few milliseconds
after=$(progress "$work/job")
[ "$before" = "$after" ] || fail "the run dir grew after the workers were reported gone ($before -> $after)"
echo "workers $workers ended with their agent; run dir stayed at $after (metrics lines, checkpoints)"

# 2. A plain dtrain (no launcher) outlives the shell that started it.
bash -c '"$1" train "${@:3}" --run-dir "$2/plain" >"$2/plain.out" 2>&1 & echo $! >"$2/plain.pid"; wait' \
  _ "$bin/dtrain" "$work" "${common[@]}" &
shell=$!
wait_for 120 lines "$work/plain/metrics.jsonl" 3 || { cat "$work/plain.out"; kill -9 "$shell"; fail "plain training did not start"; }
plain=$(cat "$work/plain.pid")
kill -9 "$shell"
wait "$shell" 2>/dev/null || true
sleep 3
alive "$plain" || { cat "$work/plain.out"; fail "plain dtrain (pid $plain) died with the shell that started it"; }
kill -9 "$plain"
wait_for 30 none_alive "$plain" || fail "could not stop plain dtrain $plain"
echo "PASS: dtrun's workers die with it; a plain dtrain outlives its parent"
