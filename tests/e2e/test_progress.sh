#!/usr/bin/env bash
# Progress line: on a terminal (a pseudo-terminal from `script`) the epoch's progress line with
# step count and ETA is redrawn in place and counts to the steps actually run; without a terminal
# (a pipe, a log file, a batch job) no progress line or escape codes are written.
source "$2/tests/e2e/lib.sh" "$1" "$2" "the shared e2e setup uses it"
command -v script >/dev/null || { echo "SKIP: no \`script\` (bsdutils) to provide a terminal"; exit 77; }
args=(train --config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=32
  --set model.heads=2 --set model.layers=1 --set model.ff_dim=64 --set model.seq_len=16
  --set train.batch_size=16 --set train.epochs=1 --set train.max_steps=200 --set train.threads=1
  --set train.eval_max_batches=2)
script -qec "$(printf '%q ' "$bin/dtrain" "${args[@]}" --run-dir "$work/tty")" /dev/null > "$work/tty.out" 2>&1 \
  || fail "training under a terminal failed: $(tail -3 "$work/tty.out")"
draws=$(tr '\r' '\n' < "$work/tty.out" | grep -c 'ETA' || true)
[ "$draws" -ge 2 ] || fail "expected the progress line drawn at least twice on a terminal, saw $draws"
tr '\r' '\n' < "$work/tty.out" | grep -q ' 200/200 loss' \
  || fail "expected the progress line to end at 200/200 (train.max_steps), saw: $(tr '\r' '\n' < "$work/tty.out" | grep ETA | tail -1)"
grep -q '\[1/1\] Train loss: ' "$work/tty.out" || fail "the course line is missing under a terminal"
"$bin/dtrain" "${args[@]}" --run-dir "$work/pipe" > "$work/pipe.out" 2>&1
if grep -q 'ETA' "$work/pipe.out" || grep -q $'\033' "$work/pipe.out" || grep -q $'\r' "$work/pipe.out"; then
  fail "progress output or escape codes written without a terminal"
fi
grep -q '\[1/1\] Train loss: ' "$work/pipe.out" || fail "the course line is missing without a terminal"
echo "progress line: $draws draws on a terminal, none in a pipe"
