#!/usr/bin/env bash
# Damaged JSON files of a run (a checkpoint's trainer.json, the run's config.json) give one
# `dtrain: error:` line, exit 2, that names the file, the position and the key where one is at fault.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to edit JSON files"
d=$bin/dtrain
run="$work/run"
"$d" train --config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=16 \
  --set model.heads=2 --set model.layers=1 --set model.ff_dim=32 --set model.seq_len=16 \
  --set train.batch_size=16 --set data.stride=64 --set train.threads=1 --set train.progress=false \
  --set train.eval_max_batches=2 --set train.max_steps=2 --set train.checkpoint_every=2 --run-dir "$run" \
  >"$work/train.out" 2>&1 || { cat "$work/train.out"; fail "the training run failed"; }
ck=checkpoints/step_000000002
[ -f "$run/$ck/trainer.json" ] && [ -f "$run/config.json" ] || fail "the run should have $ck/trainer.json and config.json"

# A fresh copy of the run for each case, so each damage is the only one.
copy() { rm -rf "$work/copy"; cp -r "$run" "$work/copy"; }
# The copy's index made to agree with its edited trainer.json (as if it had been saved so), so the
# JSON reader, not the checksum, meets the damage.
reindex() {
  "$py" - "$work/copy/$ck" <<'PY'
import json, sys
d = sys.argv[1]
table = []
for i in range(256):
    c = i
    for _ in range(8): c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    table.append(c)
def crc32c(b):
    c = 0xFFFFFFFF
    for x in b: c = table[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF
idx = json.load(open(f"{d}/index.json"))
data = open(f"{d}/trainer.json", "rb").read()
idx["files"]["trainer.json"] = {"bytes": len(data), "crc32c": crc32c(data)}
json.dump(idx, open(f"{d}/index.json", "w"))
PY
}

copy
printf '\x89PNG\r\n\x1a\n garbage' >"$work/copy/$ck/trainer.json"
expect_one_error "eval, binary trainer.json" \
  "dtrain: error: $work/copy/$ck/trainer.json does not match its size or checksum in the index (it is corrupt)" \
  "$d" eval --checkpoint "$work/copy/$ck" --split valid
expect_one_error "resume, binary trainer.json" \
  "trainer.json does not match its size or checksum in the index (it is corrupt); no good checkpoint is left" \
  "$d" train --resume "$work/copy"

copy
printf '{\n  "global_step": 2,\n  "epoch": 0,,\n}\n' >"$work/copy/$ck/trainer.json"
reindex
expect_one_error "resume, trainer.json with a stray comma" \
  "dtrain: error: invalid JSON in $work/copy/$ck/trainer.json at line 3, column 14 (byte 35): " \
  "$d" train --resume "$work/copy"

copy
printf '{"global_step": 2, "config": {"data": {}}}' >"$work/copy/$ck/trainer.json"
reindex
expect_one_error "eval, trainer.json without config.data.dir" \
  "dtrain: error: $work/copy/$ck/trainer.json has no key \"config.data.dir\"; fix the JSON text" \
  "$d" eval --checkpoint "$work/copy/$ck" --split valid
expect_one_error "resume, trainer.json without epoch" \
  "dtrain: error: $work/copy/$ck/trainer.json has no key \"epoch\"; fix the JSON text" \
  "$d" train --resume "$work/copy"

copy
printf '{"train": {"epochs": 1}, "train": {"epochs": 2}}' >"$work/copy/config.json"
expect_one_error "resume, config.json with a duplicate section" \
  "dtrain: error: invalid JSON in $work/copy/config.json at line 1, column 26 (byte 25): duplicate key \"train\"" \
  "$d" train --resume "$work/copy"
printf '[1, 2]' >"$work/copy/config.json"
expect_one_error "resume, config.json not an object" \
  "dtrain: error: $work/copy/config.json is a JSON array" \
  "$d" train --resume "$work/copy"
echo "damaged JSON is named by file, position and key"
