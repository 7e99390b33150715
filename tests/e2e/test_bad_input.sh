#!/usr/bin/env bash
# Bad input: each user error is one `dtrain: error:` line naming the culprit, exit 2, and leaves the
# run dir's files untouched; a run SIGKILLed while checkpointing leaves only complete checkpoints.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to read metrics.jsonl"
d=$bin/dtrain
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=32
  --set model.heads=2 --set model.layers=1 --set model.ff_dim=64 --set model.seq_len=16
  --set train.batch_size=16 --set data.stride=16 --set train.threads=1 --set train.progress=false
  --set train.eval_max_batches=4)
run="$work/run"
"$d" train "${common[@]}" --set train.max_steps=10 --set train.checkpoint_every=5 --run-dir "$run" \
  >"$work/base.out" 2>&1 || { cat "$work/base.out"; fail "the base training run failed"; }
[ -d "$run/checkpoints/step_000000010" ] || fail "base run should have checkpoints/step_000000010"
# run.lock names whoever holds the run dir last (a refused command may have held it): not run data.
snapshot() { (cd "$1" && find . -type f ! -name run.lock -exec sha256sum {} + | sort; find . ! -name run.lock | sort); }
base_snap=$(snapshot "$run")

# expect_error NAME NEEDLE CMD...: one `dtrain: error:` line naming NEEDLE, exit 2, and the run dir
# unchanged.
n_cases=0
expect_error() {
  expect_one_error "$@"
  [ "$(snapshot "$run")" = "$base_snap" ] || fail "$1: files under the run dir changed"
  n_cases=$((n_cases + 1))
}

# Data.
expect_error "missing data dir" "$work/no-such-data" \
  "$d" train "${common[@]}" --set data.dir="$work/no-such-data" --run-dir "$run"
: >"$work/empty.txt"
mkdir "$work/empty-dir"
expect_error "prepare: empty file" "$work/empty.txt" "$d" data prepare --input "$work/empty.txt" --out "$work/p1"
expect_error "prepare: empty folder" "$work/empty-dir" "$d" data prepare --input "$work/empty-dir" --out "$work/p2"
expect_error "prepare: missing input" "$work/no-such.txt" "$d" data prepare --input "$work/no-such.txt" --out "$work/p3"

# Config keys and values.
expect_error "unknown key (--set)" "train.lrr" "$d" train "${common[@]}" --set train.lrr=1 --run-dir "$run"
cat >"$work/bad.toml" <<EOF
[data]
dir = "$work/data"
[train]
epochs = 1
lrr = 0.1
EOF
expect_error "unknown key (TOML)" "train.lrr" "$d" train --config "$work/bad.toml" --run-dir "$run"
grep -qF "$work/bad.toml" "$work/case.err" || fail "unknown key (TOML): the error should name the file, saw: $(cat "$work/case.err")"
expect_error "heads do not divide dim" "model.heads" "$d" train "${common[@]}" --set model.heads=3 --run-dir "$run"
expect_error "negative lr" "train.lr" "$d" train "${common[@]}" --set train.lr=-0.1 --run-dir "$run"
expect_error "batch_size 0" "train.batch_size" "$d" train "${common[@]}" --set train.batch_size=0 --run-dir "$run"
expect_error "epochs not an integer" "train.epochs" "$d" train "${common[@]}" --set train.epochs=abc --run-dir "$run"
grep -qF "abc" "$work/case.err" || fail "epochs=abc: the error should show the value abc, saw: $(cat "$work/case.err")"

# Damaged checkpoints (copies of model_final): header bytes flipped, file truncated.
cp -r "$run/model_final" "$work/ck_header"
cp -r "$run/model_final" "$work/ck_trunc"
printf '\xff\xfe\xfd\xfc\n\x00' | dd of="$work/ck_header/model.safetensors" bs=1 seek=12 conv=notrunc status=none
size=$(stat -c %s "$work/ck_trunc/model.safetensors")
truncate -s $((size * 2 / 3)) "$work/ck_trunc/model.safetensors"
for ck in ck_header ck_trunc; do
  expect_error "eval $ck" "$work/$ck/model.safetensors" "$d" eval --checkpoint "$work/$ck"
  expect_error "generate $ck" "$work/$ck/model.safetensors" \
    "$d" generate --checkpoint "$work/$ck" --prompt the --tokens 5
done

# Export never replaces what is not a regular file, nor a run dir's config.json: its model config is
# NAME.config.json beside NAME.safetensors.
mkfifo "$work/pipe.safetensors"
mkdir "$work/folder.safetensors"
ln -s "$work/pipe.safetensors" "$work/link.safetensors"
targets=(pipe folder link)
if [ "$(id -u)" = 0 ] && mknod "$work/full.safetensors" c 1 7 2>/dev/null; then targets+=(full); fi  # as /dev/full
for t in "${targets[@]}"; do
  before=$(stat -c %F "$work/$t.safetensors")
  expect_one_error "export onto a $before" "cannot write $work/$t.safetensors: it is a" \
    "$d" ckpt export "$run/model_final" --out "$work/$t.safetensors"
  [ "$(stat -c %F "$work/$t.safetensors")" = "$before" ] || fail "export replaced the $before $work/$t.safetensors"
done
expect_error "export into the run dir" "inside the run dir" \
  "$d" ckpt export "$run/model_final" --out "$run/model_final.safetensors"
"$d" ckpt export "$(ck "$run" 5)" --out "$work/step5.safetensors" >/dev/null || fail "export beside the run dir failed"
[ -f "$work/step5.config.json" ] || fail "export should write NAME.config.json"
echo "ok  export: refused onto ${targets[*]} and into the run dir; NAME.config.json beside"

# Thread counts and numbers: one line that does not suggest a value the key refuses.
# (libgomp says "Invalid value" itself before dtrain starts: dtrain's line is the one that names the fix)
for omp in 0 -1 abc 1e12; do
  rc=0; OMP_NUM_THREADS=$omp "$d" train "${common[@]}" --set train.threads=0 --run-dir "$work/omp_run" \
    >"$work/omp.out" 2>"$work/omp.err" || rc=$?
  [ $rc = 2 ] && [ "$(grep -c "^dtrain: " "$work/omp.err")" = 1 ] &&
    grep -q "^dtrain: error: OMP_NUM_THREADS=$omp is not a thread count: set a whole number from 1" "$work/omp.err" ||
    { cat "$work/omp.err"; fail "OMP_NUM_THREADS=$omp: expected one dtrain line naming it (exit $rc)"; }
  echo "ok  OMP_NUM_THREADS=$omp: $(grep "^dtrain: " "$work/omp.err")" | cut -c1-160
done
expect_error "train.sample_every_s=abc" "is not a number: give a decimal number" \
  "$d" train "${common[@]}" --set train.sample_every_s=abc --run-dir "$work/omp_run"

# Resume with another model shape, and with unknown keys.
expect_error "resume with model.dim=64" "model.dim" "$d" train --resume "$run" --set model.dim=64
expect_error "resume with unknown key" "train.lrr" "$d" train --resume "$run" --set train.lrr=1
expect_error "fresh run into an existing run dir" "--resume $run" \
  "$d" train "${common[@]}" --set train.max_steps=3 --run-dir "$run"

# expect_fallback NAME RUN DAMAGE: `train --resume RUN` names its newest checkpoint (step 10) damaged
# with DAMAGE (a grep pattern) and goes on from step 5, saying so.
expect_fallback() {
  local name=$1 r=$2 damage=$3 rc=0
  "$d" train --resume "$r" >"$work/case.out" 2>"$work/case.err" || rc=$?
  [ $rc -eq 0 ] && grep -q "dtrain: checkpoint $r/checkpoints/step_000000010 is damaged: $damage" "$work/case.err" &&
    grep -q "resumed from $r/checkpoints/step_000000005 .*: the newest good checkpoint" "$work/case.out" ||
    fail "$name: expected the damage named and step 5 used, saw rc $rc: $(cat "$work/case.err" "$work/case.out")"
  echo "ok  $name: $(cut -c1-150 "$work/case.err")"
}
# Resume whose newest checkpoint is damaged (a copy of the run): named, and the one before used.
cp -r "$run" "$work/run_bad"
printf '\xff\xfe' | dd of="$work/run_bad/checkpoints/step_000000010/model.safetensors" bs=1 seek=20 conv=notrunc status=none
expect_fallback "resume past a damaged checkpoint" "$work/run_bad" \
  "$work/run_bad/checkpoints/step_000000010/model.safetensors: its header"
# Files of the newest checkpoint that are symbolic links to themselves (index.json, trainer.json, the
# step folder): named as damage, and the one before used, as for any other damage.
for what in index.json trainer.json folder; do
  cp -r "$run" "$work/run_loop"
  newest=$work/run_loop/checkpoints/step_000000010
  if [ "$what" = folder ]; then
    rm -r "$newest" && ln -s step_000000010 "$newest"
  else
    rm "$newest/$what" && ln -s "$what" "$newest/$what"
  fi
  expect_fallback "resume past a self-linked $what" "$work/run_loop" ".*Too many levels of symbolic links"
  rm -rf "$work/run_loop"
done
# Every checkpoint damaged: one error line naming the last one tried, exit 2, nothing changed.
cp -r "$run" "$work/run_all_bad"
for c in "$work"/run_all_bad/checkpoints/step_*; do
  printf '\xff\xfe' | dd of="$c/model.safetensors" bs=1 seek=20 conv=notrunc status=none
done
bad_snap=$(snapshot "$work/run_all_bad")
rc=0
"$d" train --resume "$work/run_all_bad" >"$work/case.out" 2>"$work/case.err" || rc=$?
[ $rc -eq 2 ] && [ "$(grep -c "dtrain: error: " "$work/case.err")" -eq 1 ] &&
  grep -q "dtrain: error: checkpoint $work/run_all_bad/checkpoints/step_.* is damaged: .*model.safetensors: its header .*no good checkpoint is left" "$work/case.err" ||
  fail "resume with every checkpoint damaged: expected exit 2 and one error line, saw rc $rc: $(cat "$work/case.err")"
[ "$(snapshot "$work/run_all_bad")" = "$bad_snap" ] || fail "resume with every checkpoint damaged changed the run dir"
echo "ok  every checkpoint damaged: $(grep "dtrain: error" "$work/case.err" | cut -c1-150)"
echo "$n_cases error cases: one line, exit 2, culprit named, run dir unchanged"

# SIGKILL while checkpointing every step, twice (fresh run, then a resumed one); every committed
# checkpoints/step_* must be complete and loadable; staging and deleting leftovers are ignored by --resume.
krun="$work/killed"
leftovers=0
problems=()   # broken committed-looking folders: reported at the end, after resume was tried
check_killed_dir() {  # $1 = label; sets $latest to the newest complete checkpoint
  local e name f ok
  latest=""
  for e in "$krun"/checkpoints/*; do
    [ -e "$e" ] || continue
    name=$(basename "$e")
    if [[ $name =~ ^step_[0-9]{9}$ ]]; then
      ok=1
      for f in model.safetensors optimizer.safetensors trainer.json vocab.txt; do
        [ -s "$e/$f" ] || ok=0
      done
      if [ $ok = 1 ] && "$d" eval --checkpoint "$e" --split valid >"$work/keval.out" 2>&1; then
        latest=$name
      else
        problems+=("$1: checkpoints/$name is incomplete or does not load (holds: $(ls "$e" | tr '\n' ' ')); all: $(ls "$krun/checkpoints" | tr '\n' ' ')")
      fi
    elif [[ $name =~ ^step_[0-9]{9}\.(staging|old|deleting)\.[0-9]+$ ]]; then
      leftovers=$((leftovers + 1))
    else
      fail "$1: unexpected entry checkpoints/$name"
    fi
  done
  [ -n "$latest" ] || fail "$1: no complete checkpoint at all ($(ls "$krun/checkpoints" | tr '\n' ' '))"
  # keep_checkpoints + 1 complete folders is fine (killed between commit and prune).
}
kill_after() {  # $1 = seconds after training started and a checkpoint is committed; the rest is the command
  local delay=$1; shift
  rm -f "$work/kill.out"  # else the wait below could read the previous run's lines before this one starts
  "$@" >"$work/kill.out" 2>&1 &
  local pid=$!
  pids+=("$pid")
  local waited=0
  until grep -qs '^model: ' "$work/kill.out" && ls "$krun/checkpoints" 2>/dev/null | grep -Eq '^step_[0-9]{9}$'; do
    sleep 0.1; waited=$((waited + 1))
    kill -0 "$pid" 2>/dev/null || { cat "$work/kill.out"; fail "the run to be killed exited early"; }
    [ $waited -lt 600 ] || fail "no checkpoint within 60 s in the run to be killed"
  done
  sleep "$delay"
  kill -9 "$pid" 2>/dev/null || fail "the run to be killed had already exited before the kill"
  wait "$pid" 2>/dev/null || true
  ! kill -0 "$pid" 2>/dev/null || fail "the killed run $pid is still alive"
}
kill_after 1.3 "$d" train "${common[@]}" --set train.epochs=1000 --set train.checkpoint_every=1 --run-dir "$krun"
check_killed_dir "killed fresh run"
echo "killed fresh run: latest complete checkpoint $latest ($(ls "$krun/checkpoints" | tr '\n' ' '))"
kill_after 0.7 "$d" train --resume "$krun"
grep -q "resumed from $krun/checkpoints/$latest" "$work/kill.out" ||
  { cat "$work/kill.out"; fail "the resumed run should start from $latest, saw: $(head -1 "$work/kill.out")"; }
check_killed_dir "killed resumed run"
echo "killed resumed run: latest complete checkpoint $latest ($(ls "$krun/checkpoints" | tr '\n' ' '))"
step=$((10#${latest#step_}))
target=$((step + 3))
"$d" train --resume "$krun" --set train.max_steps=$target >"$work/final.out" 2>&1 ||
  { cat "$work/final.out"; fail "train --resume after SIGKILL should succeed"; }
grep -q "resumed from $krun/checkpoints/$latest (step $step," "$work/final.out" ||
  fail "resume after SIGKILL should start from $latest, saw: $(head -1 "$work/final.out")"
[ -s "$krun/checkpoints/$(printf 'step_%09d' $target)/model.safetensors" ] && [ -s "$krun/model_final/model.safetensors" ] ||
  fail "resume after SIGKILL should reach step $target and write model_final"
"$py" - "$krun/metrics.jsonl" <<'EOF' || fail "metrics.jsonl should stay valid JSON lines across kills"
import json, sys
for i, l in enumerate(open(sys.argv[1]), 1):
    try: json.loads(l)
    except Exception as e: sys.exit(f"metrics.jsonl line {i} is not JSON ({e}): {l[:80]!r}")
EOF
echo "resume after SIGKILL reached step $target; staging/old/deleting leftovers seen after the kills: $leftovers"
if [ ${#problems[@]} -gt 0 ]; then
  printf 'FAIL: after SIGKILL every checkpoints/step_* folder must be complete and loadable or absent:\n' >&2
  printf '  %s\n' "${problems[@]}" >&2
  exit 1
fi
echo "PASS"
