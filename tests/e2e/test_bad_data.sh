#!/usr/bin/env bash
# Bad data and runaway generation: a vocab.txt that does not fit the token files stops `train` at
# the start; binary input is refused and invalid UTF-8 is read as U+FFFD with one warning; a single
# multi-megabyte line prepares; `generate` caps --tokens and prints each token as it is made.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to read the prepared data"
d=$bin/dtrain

common=(--config "$src/configs/quickstart.toml" --set model.dim=32 --set model.heads=2 --set model.layers=1
  --set model.ff_dim=64 --set model.seq_len=16 --set train.batch_size=16 --set data.stride=16
  --set train.threads=1 --set train.progress=false --set train.eval_max_batches=1)

# 1. vocab.txt with 100 words next to token files of the full vocabulary: train refuses at once.
words=$(($(wc -l <"$work/data/vocab.txt") - 1))
[ "$words" -gt 1000 ] || fail "the built-in data should have a large vocabulary, saw $words words"
cp -r "$work/data" "$work/mismatch"
head -n 101 "$work/data/vocab.txt" >"$work/mismatch/vocab.txt"
expect_one_error "train with a 100-word vocab.txt" \
  "$work/mismatch/vocab.txt lists 100 words but $work/mismatch/train.bin was written for a vocabulary of $words" \
  "$d" train "${common[@]}" --set data.dir="$work/mismatch" --run-dir "$work/run_mismatch"
grep -qF "dtrain data prepare" "$work/case.err" || fail "the vocab error should say to run dtrain data prepare"
[ ! -e "$work/run_mismatch/checkpoints" ] || fail "train with a bad vocab.txt should write no checkpoint"

# Two words swapped (same count): the token files' checksum of their vocabulary tells.
cp -r "$work/data" "$work/swapped"
"$py" - "$work/swapped/vocab.txt" <<'EOF'
import sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
(a, ca), (b, cb) = lines[10].split("\t"), lines[11].split("\t")
lines[10], lines[11] = f"{b}\t{ca}", f"{a}\t{cb}"
open(sys.argv[1], "w", encoding="utf-8").write("\n".join(lines))
EOF
[ "$(wc -l <"$work/swapped/vocab.txt")" -eq "$(wc -l <"$work/data/vocab.txt")" ] || fail "the swap should keep the word count"
expect_one_error "train with two words swapped in vocab.txt" \
  "vocabulary file $work/swapped/vocab.txt is not the one $work/swapped/train.bin was prepared with" \
  "$d" train "${common[@]}" --set data.dir="$work/swapped" --run-dir "$work/run_swapped"
[ ! -e "$work/run_swapped/checkpoints" ] || fail "train with a swapped vocab.txt should write no checkpoint"
expect_one_error "model.vocab_size the data contradicts" "model.vocab_size = 5000 but the vocabulary of $work/data has $words" \
  "$d" train "${common[@]}" --set data.dir="$work/data" --set model.vocab_size=5000 --run-dir "$work/run_vs"

# 2. Binary input: one line naming the file.
expect_one_error "prepare /bin/ls" "input /bin/ls is a binary file" "$d" data prepare --input /bin/ls --out "$work/ls"
[ ! -e "$work/ls/vocab.txt" ] || fail "prepare of a binary file should write no vocab.txt"

# Invalid UTF-8: prepared, with one warning line giving the count and the first offset.
for i in $(seq 1 20); do printf 'caf\xe9 cr\xe8me line %d\n\n' "$i"; done >"$work/latin1.txt"
"$d" data prepare --input "$work/latin1.txt" --out "$work/latin1" >"$work/l1.out" 2>"$work/l1.err" ||
  fail "prepare of Latin-1 text should succeed with a warning: $(cat "$work/l1.err")"
[ "$(wc -l <"$work/l1.err")" -eq 1 ] &&
  grep -qF "dtrain: warning: 40 invalid UTF-8 sequences read as U+FFFD (the first in $work/latin1.txt at byte 3)" "$work/l1.err" ||
  fail "expected one warning line counting 40 invalid sequences, saw: $(cat "$work/l1.err")"
LC_ALL=C grep -qF "$(printf 'caf\357\277\275\t')" "$work/latin1/vocab.txt" || fail "vocab.txt should hold caf<U+FFFD>"
echo "ok  Latin-1 input: $(cat "$work/l1.err")" | cut -c1-220

# A ~3 MB text on one line (no newline at all) prepares into three non-empty splits.
awk 'BEGIN { for (i = 0; i < 150000; i++) printf "alpha beta gamma delta " }' >"$work/oneline.txt"
[ "$(wc -l <"$work/oneline.txt")" -eq 0 ] || fail "oneline.txt should have no newline"
"$d" data prepare --input "$work/oneline.txt" --out "$work/oneline" >"$work/one.out" 2>&1 ||
  fail "prepare of one long line failed: $(cat "$work/one.out")"
grep -Eq "tokens train [1-9][0-9]{5}, valid [1-9][0-9]{4}, test [1-9][0-9]{4}$" "$work/one.out" ||
  fail "one long line should split into train/valid/test, saw: $(cat "$work/one.out")"
echo "ok  one 3 MB line: $(cat "$work/one.out")"

# 3. Generation: a tiny model, two steps.
"$d" train "${common[@]}" --set data.dir="$work/data" --set train.max_steps=2 --run-dir "$work/run" \
  >"$work/train.out" 2>&1 || { cat "$work/train.out"; fail "the tiny training run failed"; }
ck=$work/run/model_final
# A checkpoint evaluated on data whose vocabulary has as many words but other ones (the swap above,
# its token files given the new vocabulary's checksum as `data prepare` would): refused; a
# checkpoint whose own vocab.txt was edited: damaged.
cp -r "$work/swapped" "$work/swapped_ok"
"$py" - "$work/swapped_ok" <<'EOF'
import struct, sys
d = sys.argv[1]
def crc32c(data):
    crc = 0xFFFFFFFF
    for x in data:
        crc ^= x
        for _ in range(8): crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF
c = crc32c(open(f"{d}/vocab.txt", "rb").read())
for s in ("train", "valid", "test"):  # header bytes 24..28: the vocabulary's CRC-32C
    p = f"{d}/{s}.bin"; b = bytearray(open(p, "rb").read()); b[24:28] = struct.pack("<I", c); open(p, "wb").write(b)
EOF
expect_one_error "eval on data with other words" "was trained with another vocabulary than $work/swapped_ok/vocab.txt" \
  "$d" eval --checkpoint "$ck" --data "$work/swapped_ok"
cp -r "$ck" "$work/ck_vocab"
cp "$work/swapped/vocab.txt" "$work/ck_vocab/vocab.txt"
expect_one_error "generate with an edited vocab.txt in the checkpoint" "$work/ck_vocab/vocab.txt does not match" \
  "$d" generate --checkpoint "$work/ck_vocab" --prompt the --tokens 3
expect_one_error "generate --tokens 100000000" "--tokens 100000000 is outside 0..100000" \
  "$d" generate --checkpoint "$ck" --prompt the --tokens 100000000

# The prompt and exactly N tokens (words plus line breaks for <eos>), then a newline.
"$d" generate --checkpoint "$ck" --prompt "the licence" --tokens 30 --threads 1 >"$work/gen.out" ||
  fail "generate --tokens 30 failed"
[ "$(head -c 11 "$work/gen.out")" = "the licence" ] || fail "generate should print the prompt first: $(head -c 80 "$work/gen.out")"
[ "$(tail -c 1 "$work/gen.out" | od -An -c | tr -d ' ')" = '\n' ] || fail "generate output should end with a newline"
n=$(($(wc -w <"$work/gen.out") - 2 + $(wc -l <"$work/gen.out") - 1))
[ "$n" -eq 30 ] || fail "generate --tokens 30 printed $n tokens: $(tr '\n' '|' <"$work/gen.out")"
echo "ok  generate --tokens 30: $n tokens after the prompt"

# Streaming: under a CPU-time limit too short for 100000 tokens, the tokens made before the kill
# are already on stdout (before this change, nothing was printed until the end).
rc=0
(
  ulimit -c 0 -t 4
  "$d" generate --checkpoint "$ck" --prompt "the licence" --tokens 100000 --threads 1 >"$work/stream.out" 2>"$work/stream.err"
  exit $?  # this shell waits and reports the kill, to /dev/null
) 2>/dev/null || rc=$?
n=$(($(wc -w <"$work/stream.out") - 2 + $(wc -l <"$work/stream.out")))
if [ $rc -eq 0 ]; then
  echo "note: 100000 tokens took under 4 s of CPU here, so streaming cannot be told apart; checked the count only"
  [ "$n" -eq 100001 ] || fail "generate --tokens 100000 printed $((n - 1)) tokens"
else
  [ "$(head -c 11 "$work/stream.out")" = "the licence" ] ||
    fail "streamed output should start with the prompt, saw: $(head -c 80 "$work/stream.out") (exit $rc, $(cat "$work/stream.err"))"
  [ "$n" -ge 20 ] && [ "$n" -lt 100000 ] ||
    fail "generate killed after 4 s of CPU should already have printed some of its 100000 tokens, saw $n (exit $rc)"
  echo "ok  streaming: $n tokens printed before the CPU limit stopped generate (exit $rc)"
fi
echo "PASS"
