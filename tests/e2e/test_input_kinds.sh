#!/usr/bin/env bash
# Every file the user names is checked before it is read: a named pipe, a folder or a device (/dev/zero,
# /dev/urandom) where a file belongs gives one line at once, never a wait forever or an endless read;
# and inputs that would silently mislead (a picture given as raw pixels, a damaged label) are refused.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to write test files"
d=$bin/dtrain
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=32
  --set model.heads=2 --set model.layers=1 --set model.ff_dim=64 --set model.seq_len=16
  --set train.batch_size=16 --set data.stride=16 --set train.threads=1 --set train.progress=false
  --set train.eval_max_batches=2 --set train.max_steps=2 --set train.checkpoint_every=2)
"$d" train "${common[@]}" --run-dir "$work/run" >"$work/train.out" 2>&1 || { cat "$work/train.out"; fail "training"; }
ck=$work/run/checkpoints/step_000000002
mkfifo "$work/pipe"
mkdir "$work/folder"
# quick NAME NEEDLE CMD...: one line within 20 s (a blocked reader is killed by timeout and fails).
quick() { local name=$1 needle=$2; shift 2; expect_one_error "$name" "$needle" timeout 20 "$@"; }
for bad in "$work/pipe" "$work/folder" /dev/urandom /dev/zero; do
  quick "config $bad" "not a regular file" "$d" train --config "$bad" --run-dir "$work/r"
done
ln -s "$work/pipe" "$work/pipe.json"
quick "JSON config linked to a pipe" "named pipe" "$d" train --config "$work/pipe.json" --run-dir "$work/r"
quick "schedule list on a pipe" "named pipe" "$d" plan --file "$work/pipe"

# Inside a checkpoint: a pipe or an endless device in place of a file is damage, said as such.
swap_in() { mv "$ck/$1" "$work/kept"; if [ "$2" = pipe ]; then mkfifo "$ck/$1"; else ln -s "$2" "$ck/$1"; fi; }
restore() { rm -f "$ck/$1"; mv "$work/kept" "$ck/$1"; }
for f in index.json trainer.json model.safetensors; do
  swap_in "$f" pipe
  quick "checkpoint $f as a pipe" "damaged" "$d" ckpt verify "$ck"
  restore "$f"
  swap_in "$f" /dev/zero
  quick "checkpoint $f linked to /dev/zero" "damaged" "$d" ckpt verify "$ck"
  restore "$f"
done
swap_in trainer.json pipe
quick "resume from a checkpoint with a pipe" "damaged" \
  "$d" train "${common[@]}" --set train.max_steps=4 --run-dir "$work/run2" --resume "$ck"
restore trainer.json
"$d" ckpt verify "$ck" >/dev/null || fail "the checkpoint should verify once restored"

# The data a run reads and the text prepare reads.
cp -r "$work/data" "$work/data2" && rm "$work/data2/valid.bin" && mkfifo "$work/data2/valid.bin"
quick "a token file that is a pipe" "not a regular file" "$d" train "${common[@]}" --set data.dir="$work/data2" \
  --run-dir "$work/r3"
rm "$work/data2/valid.bin" && cp "$work/data/valid.bin" "$work/data2/"
rm "$work/data2/vocab.txt" && mkfifo "$work/data2/vocab.txt"
quick "a vocabulary that is a pipe" "named pipe" "$d" train "${common[@]}" --set data.dir="$work/data2" \
  --run-dir "$work/r3"
quick "prepare from a pipe" "named pipe" "$d" data prepare --input "$work/pipe" --out "$work/p"

# A report over a run whose JSON files are endless or pipes: one line, at once.
cp -r "$work/run" "$work/run3" && rm "$work/run3/summary.json" && ln -s /dev/zero "$work/run3/summary.json"
quick "report with summary.json linked to /dev/zero" "not a regular file" "$d" report "$work/run3" --out "$work/x.html"
echo "PASS: pipes, folders and devices where files belong are refused at once"
