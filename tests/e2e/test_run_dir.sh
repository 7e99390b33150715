#!/usr/bin/env bash
# The run dir under careless use: a second writer is refused naming the holder; a path that is a file,
# a read-only file system and an impossible batch are one line each; a run killed before its first
# checkpoint, or after one, resumes with every step logged once (metrics.jsonl and TensorBoard) and
# no leftover staging folder; a resumed 2-rank run prints the epoch loss of the uninterrupted one;
# resuming at another world size says so.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to read metrics and event files"
d=$bin/dtrain
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=32
  --set model.heads=2 --set model.layers=1 --set model.ff_dim=64 --set model.seq_len=16
  --set train.batch_size=16 --set train.threads=1 --set train.progress=false --set train.log_every=1
  --set train.eval_max_batches=2)
logged_step() {  # true once $1/metrics.jsonl has a train record at step >= $2
  [ -f "$1/metrics.jsonl" ] && "$py" - "$1/metrics.jsonl" "$2" <<'EOF'
import json, sys
steps = [json.loads(l)["step"] for l in open(sys.argv[1]) if l.endswith("\n") and '"train"' in l]
sys.exit(0 if steps and max(steps) >= int(sys.argv[2]) else 1)
EOF
}
# Every step 1..$2 logged exactly once in $1's metrics.jsonl and its one TensorBoard file.
check_logs_once() {
  "$py" - "$1" "$2" <<'EOF' || fail "$1: logs hold steps twice or miss some (see above)"
import glob, json, struct, sys
run, n = sys.argv[1], int(sys.argv[2])
steps = [json.loads(l)["step"] for l in open(f"{run}/metrics.jsonl") if json.loads(l)["type"] == "train"]
if steps != list(range(1, n + 1)): sys.exit(f"metrics.jsonl train steps {steps}, expected 1..{n} once each")
files = glob.glob(f"{run}/events.out.tfevents.*")
if len(files) != 1: sys.exit(f"expected one events file, found {len(files)}: {files}")
def varint(b, i):
    x = s = 0
    while True:
        c = b[i]; i += 1; x |= (c & 0x7F) << s; s += 7
        if c < 0x80: return x, i
def fields(b):  # (field, wire, value) of a protobuf message
    i = 0
    while i < len(b):
        key, i = varint(b, i); f, w = key >> 3, key & 7
        if w == 0: v, i = varint(b, i)
        elif w == 1: v = b[i:i + 8]; i += 8
        elif w == 5: v = b[i:i + 4]; i += 4
        else: ln, i = varint(b, i); v = b[i:i + ln]; i += ln
        yield f, w, v
data = open(files[0], "rb").read(); i = 0; tb = []
while i < len(data):
    (ln,) = struct.unpack("<Q", data[i:i + 8]); ev = data[i + 12:i + 12 + ln]; i += 16 + ln
    step = next((v for f, w, v in fields(ev) if f == 2), None)
    for f, w, summ in fields(ev):
        if f != 5: continue
        for f2, _, val in fields(summ):
            tag = next(v for f3, _, v in fields(val) if f3 == 1).decode()
            if tag == "Loss/train_step": tb.append(step)
if i != len(data): sys.exit(f"events file ends mid-record ({len(data) - i} bytes over)")
if tb != list(range(1, n + 1)): sys.exit(f"events file Loss/train_step steps {tb}, expected 1..{n} once each")
print(f"{run}: steps 1..{n} once each in metrics.jsonl and the events file")
EOF
}

# 1. A second writer on a run dir in use: one line naming the holder's pid and host.
run="$work/busy"
"$d" train "${common[@]}" --set train.max_steps=1000000 --set train.epochs=0 --set train.checkpoint_every=5 \
  --run-dir "$run" >"$work/busy.out" 2>&1 &
holder=$!
pids+=("$holder")
wait_for 120 logged_step "$run" 6 || { cat "$work/busy.out"; fail "the first writer did not start"; }
before=$(wc -l <"$run/metrics.jsonl")
expect_one_error "second writer (--resume)" "in use by another dtrain run (pid $holder on host $(hostname)" \
  "$d" train --resume "$run" --set train.max_steps=3
expect_one_error "second writer (fresh run)" "pid $holder" "$d" train "${common[@]}" --run-dir "$run"
kill -9 "$holder"
wait "$holder" 2>/dev/null || true
[ "$(wc -l <"$run/metrics.jsonl")" -ge "$before" ] || fail "the refused writers touched the holder's metrics"
# The holder is gone (killed): its lock went with it, and the run resumes.
latest_step() { local c; c=$(ls "$1/checkpoints" | grep -E '^step_[0-9]{9}$' | sort | tail -1); echo $((10#${c#step_})); }
target=$(($(latest_step "$run") + 3))
"$d" train --resume "$run" --set train.max_steps=$target >"$work/busy2.out" 2>&1 ||
  { cat "$work/busy2.out"; fail "resume after the holder died should succeed"; }
check_logs_once "$run" $target

# 2. Run dirs that cannot be used, and a batch that cannot fit: one line each.
: >"$work/a-file"
expect_one_error "run dir is a file" "$work/a-file" "$d" train "${common[@]}" --set train.max_steps=2 --run-dir "$work/a-file"
expect_one_error "huge batch" "train.batch_size = 99999999999" \
  "$d" train "${common[@]}" --set train.batch_size=99999999999 --run-dir "$work/huge"
expect_one_error "batch beyond memory" "train.batch_size = 100000000 does not fit" \
  "$d" train "${common[@]}" --set train.batch_size=100000000 --run-dir "$work/big"
expect_one_error "negative checkpoint_every" "train.checkpoint_every = -1" \
  "$d" train "${common[@]}" --set train.checkpoint_every=-1 --run-dir "$work/neg"
if unshare --mount true 2>/dev/null; then
  mkdir -p "$work/ro"
  rc=0
  unshare --mount bash -c "mount -t tmpfs -o ro tmpfs '$work/ro' && exec '$d' train $(printf '%q ' "${common[@]}") \
    --set train.max_steps=2 --run-dir '$work/ro/run'" >"$work/case.out" 2>"$work/case.err" || rc=$?
  [ $rc -eq 2 ] && [ "$(wc -l <"$work/case.err")" -eq 1 ] && grep -q "^dtrain: error: .*$work/ro/run.*read-only" "$work/case.err" ||
    fail "run dir on a read-only file system: expected exit 2 and one line naming it, saw rc $rc: $(cat "$work/case.err")"
  echo "ok  read-only run dir: $(cat "$work/case.err")"
else
  echo "skipped the read-only case: unshare --mount is not permitted here"
fi

# 3. Killed before its first checkpoint (long epoch, no step checkpoints): --resume starts afresh.
run="$work/early"
"$d" train "${common[@]}" --set data.stride=1 --set train.epochs=1 --run-dir "$run" >"$work/early.out" 2>&1 &
pids+=($!)
wait_for 120 logged_step "$run" 8 || { cat "$work/early.out"; fail "the early run did not start"; }
kill -9 $!
wait $! 2>/dev/null || true
[ ! -d "$run/checkpoints" ] || fail "the early run should have no checkpoint yet"
"$d" train --resume "$run" --set train.max_steps=10 >"$work/early2.out" 2>&1 ||
  { cat "$work/early2.out"; fail "--resume of a run killed before its first checkpoint should start afresh"; }
grep -q "has no checkpoint yet (its run stopped before the first one): starting it afresh" "$work/early2.out" ||
  fail "--resume without checkpoint should say it starts afresh, saw: $(head -2 "$work/early2.out")"
check_logs_once "$run" 10

# 4. Killed after a checkpoint, and killed while model_best was written (its staging folder left):
# the resumed run logs each step once and the leftover goes.
run="$work/late"
"$d" train "${common[@]}" --set data.stride=256 --set train.epochs=100000 --set train.checkpoint_every=4 \
  --run-dir "$run" >"$work/late.out" 2>&1 &
pids+=($!)
wait_for 120 logged_step "$run" 14 || { cat "$work/late.out"; fail "the late run did not start"; }
kill -9 $!
wait $! 2>/dev/null || true
mkdir -p "$run/model_best.staging.999999" "$run/model_final.staging.999999" \
  "$run/checkpoints/step_000000001.staging.999999"
last=$(latest_step "$run")
# 9 steps per epoch: run past the next epoch end, where model_best is written (its best so far is
# made worse than any loss, so that it is).
target=$(( (last / 9 + 1) * 9 + 2 ))
ck=$(printf '%s/checkpoints/step_%09d/trainer.json' "$run" "$last")
"$py" -c 'import json,sys; p=sys.argv[1]; t=json.load(open(p)); t["best_val"]=1e30; open(p,"w").write(json.dumps(t))' "$ck"
"$d" train --resume "$run" --set train.max_steps=$target >"$work/late2.out" 2>&1 ||
  { cat "$work/late2.out"; fail "resume after the kill should succeed"; }
check_logs_once "$run" $target
for leftover in model_best.staging.999999 model_final.staging.999999; do
  [ ! -e "$run/$leftover" ] || fail "a leftover $leftover folder was not pruned"
done
[ ! -e "$run/checkpoints/step_000000001.staging.999999" ] || fail "a leftover checkpoint staging folder was not pruned"

# 5. Two ranks: stop mid-epoch and resume; the epoch's train loss equals the uninterrupted run's.
two=(--set data.stride=256 --set train.epochs=1)
"$bin/dtrun" --standalone --nproc-per-node 2 "$d" train "${common[@]}" "${two[@]}" --run-dir "$work/straight" \
  >"$work/straight.out" 2>&1 || { cat "$work/straight.out"; fail "the uninterrupted 2-rank run failed"; }
"$bin/dtrun" --standalone --nproc-per-node 2 "$d" train "${common[@]}" "${two[@]}" --set train.max_steps=3 \
  --run-dir "$work/halves" >"$work/half1.out" 2>&1 || { cat "$work/half1.out"; fail "the first half failed"; }
"$bin/dtrun" --standalone --nproc-per-node 2 "$d" train --resume "$work/halves" --set train.max_steps=0 \
  >"$work/half2.out" 2>&1 || { cat "$work/half2.out"; fail "the resumed 2-rank run failed"; }
"$py" - "$work/straight" "$work/halves" <<'EOF' || fail "the resumed 2-rank run's epoch loss differs (see above)"
import json, sys
def last_epoch(run): return [json.loads(l) for l in open(f"{run}/metrics.jsonl") if '"epoch"' in l and json.loads(l)["type"] == "epoch"][-1]
a, b = last_epoch(sys.argv[1]), last_epoch(sys.argv[2])
if a["step"] != b["step"] or a["step"] <= 3: sys.exit(f"epoch records at steps {a['step']} and {b['step']}: expected one full epoch past step 3")
if abs(a["train_loss"] - b["train_loss"]) > 1e-9 * abs(a["train_loss"]): sys.exit(f"epoch train loss {a['train_loss']!r} uninterrupted vs {b['train_loss']!r} resumed")
print(f"2 ranks: epoch train loss {a['train_loss']:.9f} uninterrupted, {b['train_loss']:.9f} resumed at step 3")
EOF

# 6. Resuming at another world size says so in one line.
"$d" train "${common[@]}" "${two[@]}" --set train.max_steps=2 --run-dir "$work/grow" >"$work/grow1.out" 2>&1 ||
  { cat "$work/grow1.out"; fail "the 1-rank run failed"; }
"$bin/dtrun" --standalone --nproc-per-node 2 "$d" train --resume "$work/grow" --set train.max_steps=4 \
  >"$work/grow2.out" 2>&1 || { cat "$work/grow2.out"; fail "resuming at 2 ranks failed"; }
[ "$(grep -c "note: the checkpoint was written with a global batch of 16 samples (32 consumed in epoch 1), this run has 32" "$work/grow2.out")" -eq 1 ] ||
  fail "resuming at another world size should say so once, saw: $(cat "$work/grow2.out")"
echo "PASS"
