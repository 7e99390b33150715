#!/usr/bin/env bash
# A run dir follows one line of history: resuming from an earlier checkpoint of its own run dir (with
# a new learning rate) moves the later checkpoints and model_final aside, so that a restart after a
# killed worker, pruning, and a later `--resume RUN` follow the new line and end on the weights of the
# uninterrupted new line; a resume past a damaged newest checkpoint moves it aside too (not lost).
source "$2/tests/e2e/lib.sh" "$1" "$2" "to read trainer.json and compare weights"
d=$bin/dtrain
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=32
  --set model.heads=2 --set model.layers=1 --set model.ff_dim=64 --set model.seq_len=16
  --set train.batch_size=16 --set data.stride=16 --set train.threads=1 --set train.progress=false
  --set train.eval_max_batches=2 --set train.epochs=1000)
# The learning rate a checkpoint's run used (0 when it cannot be read).
lr_of() { "$py" -c 'import json,sys; print(round(json.load(open(sys.argv[1]+"/trainer.json"))["config"]["train"]["lr"], 7))' "$1" 2>/dev/null || echo 0; }

# The old line: 40 steps at the preset's learning rate, a checkpoint every 10.
run="$work/run"
"$d" train "${common[@]}" --set train.max_steps=40 --set train.checkpoint_every=10 --set train.keep_checkpoints=10 \
  --run-dir "$run" >"$work/old.out" 2>&1 || { cat "$work/old.out"; fail "the first run failed"; }
[ -d "$(ck "$run" 40)" ] && [ -d "$run/model_final" ] || fail "the first run should end with step 40 and model_final"
old_lr=$(lr_of "$(ck "$run" 40)")
cp -r "$run" "$work/straight"
cp -r "$run" "$work/damaged"

# The new line, uninterrupted (in a copy): from step 10 at another learning rate, to step 1000 with a
# checkpoint every 100 (at about 5 ms a step, long enough and far enough apart for the restart below
# to find its worker running and a checkpoint of the new line in place).
new=(--set train.lr=0.0005 --set train.max_steps=1000 --set train.checkpoint_every=100 --set train.keep_checkpoints=2)
"$d" train --resume "$(ck "$work/straight" 10)" "${new[@]}" >"$work/straight.out" 2>&1 ||
  { cat "$work/straight.out"; fail "the uninterrupted new line failed"; }
grep -q "goes on from step 10: what came after it (checkpoints step_000000020..step_000000040 (3), model_best, model_final, summary.json)" \
  "$work/straight.out" || { cat "$work/straight.out"; fail "the resume should say what it moved aside"; }
aside=$(ls -d "$work"/straight/abandoned/after_step_10.* 2>/dev/null | head -1)
[ -n "$aside" ] && [ -d "$aside/checkpoints/step_000000040" ] && [ -d "$aside/model_final" ] &&
  [ "$(lr_of "$aside/checkpoints/step_000000040")" = "$old_lr" ] && [ -f "$aside/metrics.jsonl" ] ||
  fail "the old line's checkpoints, model_final and logs should be under abandoned/after_step_10.*, saw: $(ls -R "$work/straight/abandoned" | head -20)"
echo "ok  a resume from step 10 moved the old line aside: $(ls "$aside/checkpoints" | tr '\n' ' ')"

# The same new line, its worker killed once a checkpoint of the new line exists: the restart must
# resume the new line (not the old line's newer step 40) and end on the uninterrupted weights.
"$bin/dtrun" --standalone --max-restarts 1 "$d" train --resume "$(ck "$run" 10)" "${new[@]}" \
  >"$work/restarted.out" 2>&1 &
agent=$!
pids+=("$agent")
new_line_saved() {  # a checkpoint of the new line is among the run dir's
  local c
  for c in "$run"/checkpoints/step_*; do [ "$(lr_of "$c")" = 0.0005 ] && return 0; done
  return 1
}
wait_for 120 new_line_saved ||
  { cat "$work/restarted.out"; fail "no checkpoint of the new line to resume from"; }
victim=$(worker_pid "$agent" 0)
[ -n "$victim" ] && kill -9 "$victim" || fail "the worker finished before it could be killed"
rc=0; wait "$agent" || rc=$?
[ "$rc" -eq 0 ] || { cat "$work/restarted.out"; fail "the restarted job failed ($rc)"; }
grep -q "restarting all workers (restart 1 of 1)" "$work/restarted.out" || { cat "$work/restarted.out"; fail "no restart"; }
"$py" "$src/tests/python/compare_weights.py" "$work/straight/model_final" "$run/model_final" 0 \
  "restarted new line vs uninterrupted new line" || { cat "$work/restarted.out"; fail "the restart did not follow the new line"; }
for c in "$run"/checkpoints/step_*; do
  [ "$(lr_of "$c")" = 0.0005 ] || fail "$c belongs to the old line, yet it is among the run dir's checkpoints"
done
[ "$(ls -d "$run"/checkpoints/step_* | wc -l)" -eq 2 ] || fail "pruning should keep the new line's 2 newest checkpoints"
echo "ok  the restart resumed the new line: $(grep -o 'resumed from [^ ]*' "$work/restarted.out" | tail -1)"

# A later --resume RUN continues the new line too.
"$d" train --resume "$run" --set train.max_steps=1010 >"$work/later.out" 2>&1 || { cat "$work/later.out"; fail "--resume RUN failed"; }
grep -q "resumed from $(ck "$run" 1000) (step 1000," "$work/later.out" || { cat "$work/later.out"; fail "--resume RUN should continue the new line"; }
echo "ok  --resume RUN continues the new line from step 1000"

# Resuming past a damaged newest checkpoint: the damaged one is moved aside (kept), not left as the
# run dir's newest.
printf '\xff\xfe' | dd of="$(ck "$work/damaged" 40)/model.safetensors" bs=1 seek=20 conv=notrunc status=none
"$d" train --resume "$work/damaged" --set train.max_steps=45 --set train.checkpoint_every=5 \
  >"$work/damaged.out" 2>"$work/damaged.err" || { cat "$work/damaged.out" "$work/damaged.err"; fail "resume past a damaged checkpoint failed"; }
grep -q "resumed from $(ck "$work/damaged" 30) .*newest good" "$work/damaged.out" || { cat "$work/damaged.out"; fail "should resume step 30"; }
ls -d "$work"/damaged/abandoned/after_step_30.*/checkpoints/step_000000040 >/dev/null 2>&1 ||
  fail "the damaged step 40 should be kept under abandoned/after_step_30.*"
[ "$(lr_of "$(ck "$work/damaged" 45)")" = "$old_lr" ] || fail "the resumed run should reach step 45"
echo "ok  a damaged newest checkpoint is moved aside with what came after the step resumed from"
echo PASS
