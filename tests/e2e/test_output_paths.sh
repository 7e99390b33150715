#!/usr/bin/env bash
# Nothing the user has is replaced: every command that writes refuses an output inside a checkpoint or
# a run dir, a run dir (even one a live job holds), and a folder of someone else's files, with one line;
# the same command may replace its own earlier output. The refused folders stay byte for byte.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to hold a run dir's lock"
d=$bin/dtrain
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=32
  --set model.heads=2 --set model.layers=1 --set model.ff_dim=64 --set model.seq_len=16
  --set train.batch_size=16 --set data.stride=16 --set train.threads=1 --set train.progress=false
  --set train.eval_max_batches=2 --set train.max_steps=4 --set train.checkpoint_every=4)
run=$work/run ck=$work/run/checkpoints/step_000000004
"$d" train "${common[@]}" --run-dir "$run" >"$work/train.out" 2>&1 || { cat "$work/train.out"; fail "training"; }
"$d" ckpt export "$ck" --out "$work/w.safetensors" >/dev/null
mkdir "$work/mine" && echo "my thesis" >"$work/mine/thesis.txt"
snap() { (cd "$work" && find run data mine -type f ! -name run.lock -exec sha256sum {} + | sort); }
before=$(snap)
import=("$d" ckpt import "$work/w.safetensors" --config "$work/w.config.json")

# A run dir that a job holds (a python3 process keeps run.lock locked as a training job does).
"$py" -c 'import fcntl,sys,time; f=open(sys.argv[1],"r+"); f.truncate(); f.write("pid 1 on host h\n"); f.flush()
fcntl.flock(f,fcntl.LOCK_EX); open(sys.argv[2],"w").close(); time.sleep(600)' "$run/run.lock" "$work/held" &
pids+=($!)
wait_for 20 test -e "$work/held" || fail "the lock holder did not start"
expect_one_error "import over a held run dir" "that a training job holds" "${import[@]}" --out "$run"
kill "${pids[0]}"; wait "${pids[0]}" 2>/dev/null || true; pids=()
expect_one_error "import over a run dir" "is a run dir" "${import[@]}" --out "$run"
expect_one_error "import into a checkpoint" "inside the run dir" "${import[@]}" --out "$ck"
expect_one_error "import over prepared data" "did not make (e.g." "${import[@]}" --out "$work/data"
expect_one_error "import over a user's folder" "thesis.txt" "${import[@]}" --out "$work/mine"
expect_one_error "import over a file" "is a file, not a folder" "${import[@]}" --out "$work/mine/thesis.txt"
expect_one_error "export onto a checkpoint's file" "inside the checkpoint" \
  "$d" ckpt export "$ck" --out "$ck/model.safetensors"
expect_one_error "export into a run dir" "inside the run dir" "$d" ckpt export "$ck" --out "$run/w.safetensors"
expect_one_error "report onto a run's config" "inside the run dir" "$d" report "$run" --out "$run/config.json"
expect_one_error "data prepare over a run dir" "is a run dir" "$d" data builtin --out "$run"
expect_one_error "data prepare over a user's folder" "thesis.txt" \
  "$d" data prepare --input "$work/data/text" --out "$work/mine"
expect_one_error "images over a user's folder" "thesis.txt" "$d" data fashion-mnist --out "$work/mine"
expect_one_error "scale into a checkpoint" "inside the checkpoint" \
  "$d" scale --config "$src/configs/quickstart.toml" --nproc 1 --out "$ck/study"
expect_one_error "plan --save into a checkpoint" "inside the checkpoint" \
  "$d" plan --schedule 1f1b --pp 2 --microbatches 4 --save "$ck/lists.txt"
expect_one_error "a run dir inside a checkpoint" "inside the checkpoint" \
  "$d" train "${common[@]}" --run-dir "$ck/run"
expect_one_error "a run dir that holds data" "holds prepared data" "$d" train "${common[@]}" --run-dir "$work/data"
[ "$(snap)" = "$before" ] || fail "a refused command changed the run dir, the data or the user's folder"
"$d" ckpt verify "$ck" >/dev/null || fail "the checkpoint no longer verifies"

# What a command made, it may make again; an empty folder is free.
"${import[@]}" --out "$work/imported" >/dev/null
"${import[@]}" --out "$work/imported/" >/dev/null || fail "import over its own earlier import (tab-completed) was refused"
"$d" ckpt verify "$work/imported" >/dev/null || fail "the import written through imported/ does not verify"
"$d" ckpt import "$work/w.safetensors" --config "$run/config.json" --out "$work/from_run_config" >/dev/null ||
  fail "ckpt import --config RUN/config.json (a run's config) was refused"
mkdir "$work/empty" && "$d" data prepare --input "$work/data/text" --out "$work/empty" >/dev/null
"$d" data prepare --input "$work/data/text" --out "$work/empty" >/dev/null || fail "re-preparing was refused"
"$d" report "$run" >/dev/null || fail "the report beside a run's files (RUN/report.html) was refused"
echo "PASS: every writer refuses what it did not make; its own output it replaces"
