#!/usr/bin/env bash
# A checkpoint index that contradicts itself is damage, never weights: two chunks of a tensor made to
# overlap (half of it in no chunk), or a tensor recorded with another shape than the model it records,
# fail `ckpt verify` and `ckpt export` with one line naming the tensor, and a resume (one process, of
# a 2-rank run) names the damage and falls back to the checkpoint before.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to edit index.json"
d=$bin/dtrain
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=32
  --set model.heads=2 --set model.layers=1 --set model.ff_dim=64 --set model.seq_len=16
  --set train.batch_size=8 --set data.stride=16 --set train.threads=1 --set train.progress=false
  --set train.eval_max_batches=2 --set train.max_steps=10 --set train.checkpoint_every=5)
run_ranks base 2   # sharded checkpoints: each replica writes part of every unit, so tensors have chunks in both files

# edit_index DIR MODE: overlap (chunk 1 of a tensor with two chunks moved onto chunk 0) or shape (a
# bias of n elements recorded as [n/2, 2], its chunk to match: the same bytes, checksums intact);
# prints the tensor edited.
edit_index() {
  "$py" - "$1/index.json" "$2" <<'EOF'
import json, sys
path, mode = sys.argv[1], sys.argv[2]
idx = json.load(open(path))
for name, t in sorted(idx["tensors"].items()):
    if name.startswith("optimizer."): continue
    c = t["chunks"]
    if mode == "overlap" and len(c) >= 2 and len(t["shape"]) == 2 and c[1]["offsets"] != c[0]["offsets"]:
        c[1]["offsets"] = list(c[0]["offsets"])
        break
    if mode == "shape" and len(t["shape"]) == 1 and len(c) == 1 and t["shape"][0] % 2 == 0:
        n = t["shape"][0]
        t["shape"] = [n // 2, 2]; c[0]["offsets"] = [0, 0]; c[0]["sizes"] = [n // 2, 2]
        break
else:
    sys.exit(f"no tensor to edit for {mode}")
json.dump(idx, open(path, "w"))
print(name)
EOF
}

for mode in overlap shape; do
  cp -r "$work/base" "$work/$mode"
  tensor=$(edit_index "$(ck "$work/$mode" 10)" "$mode")
  expect_one_error "verify ($mode)" "$tensor" "$d" ckpt verify "$(ck "$work/$mode" 10)"
  grep -qF "the index is damaged" "$work/case.err" || fail "verify ($mode): should call the index damaged"
  expect_one_error "export ($mode)" "$tensor" "$d" ckpt export "$(ck "$work/$mode" 10)" --out "$work/$mode.safetensors"
  [ ! -e "$work/$mode.safetensors" ] || fail "export ($mode) wrote a file"
  "$d" train --resume "$work/$mode" --set train.max_steps=12 >"$work/$mode.out" 2>"$work/$mode.err" ||
    { cat "$work/$mode.out" "$work/$mode.err"; fail "resume ($mode) should fall back to step 5"; }
  grep -qF "checkpoint $(ck "$work/$mode" 10) is damaged" "$work/$mode.err" && grep -qF "$tensor" "$work/$mode.err" ||
    fail "resume ($mode) should name the damaged checkpoint and tensor, saw: $(cat "$work/$mode.err")"
  grep -q "resumed from $(ck "$work/$mode" 5) .*newest good" "$work/$mode.out" ||
    { cat "$work/$mode.out"; fail "resume ($mode) should use step 5"; }
  echo "ok  resume ($mode): $(head -1 "$work/$mode.err" | cut -c1-200)"
done
echo PASS
