#!/usr/bin/env bash
# Distributed checkpoints: a round trip 1 process → FSDP 4 → DDP 2 → HSDP 2×2 → 1 process keeps
# weights and optimizer state bit for bit; FSDP 2 resumed at FSDP 4, DDP 4 and 1 process goes on
# with the uninterrupted run's samples and trajectory (dropout on); a job killed during an
# asynchronous save resumes from the checkpoint before; a flipped byte, a truncated rank file and a
# missing index are each named and the previous checkpoint used; `ckpt export` loads in PyTorch with
# the same logits and `ckpt import` trains to the same losses as the original.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to compare metrics"
# 1031 windows of 32 tokens; a global batch of 8 keeps 80 steps inside the first epoch.
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=64
  --set model.heads=4 --set model.layers=2 --set model.ff_dim=256 --set model.seq_len=32
  --set data.stride=32 --set train.log_every=1 --set train.progress=false --set train.eval_max_batches=2
  --set model.dropout=0.1 --set train.threads=1 --set train.keep_checkpoints=10)
run() {  # $1 = name, $2 = ranks, then arguments of dtrain train
  local name=$1 n=$2; shift 2
  "$bin/dtrun" --standalone --nproc-per-node "$n" "$bin/dtrain" train "$@" >"$work/$name.out" 2>&1 ||
    { cat "$work/$name.out"; fail "run $name failed"; }
}
layout() {  # ranks and settings of a named layout with a global batch of 8
  case $1 in
    one) echo "1 --set parallel.dp_shard=1 --set parallel.dp_replicate=-1 --set train.batch_size=8" ;;
    fsdp2) echo "2 --set parallel.dp_shard=2 --set parallel.dp_replicate=1 --set train.batch_size=4" ;;
    fsdp4) echo "4 --set parallel.dp_shard=4 --set parallel.dp_replicate=1 --set train.batch_size=2" ;;
    ddp2) echo "2 --set parallel.dp_shard=1 --set parallel.dp_replicate=-1 --set train.batch_size=4" ;;
    ddp4) echo "4 --set parallel.dp_shard=1 --set parallel.dp_replicate=-1 --set train.batch_size=2" ;;
    hsdp) echo "4 --set parallel.dp_shard=2 --set parallel.dp_replicate=2 --set train.batch_size=2" ;;
  esac
}

# --- Continuation: FSDP 4, DDP 4 and 1 process resume FSDP 2's step-40 checkpoint and go on to step 80
# (the schedule is planned for 80 steps throughout), against one process's 80 straight steps.
read -r n rest <<<"$(layout one)"
# shellcheck disable=SC2086
run straight 1 "${common[@]}" $rest --set train.max_steps=80 --run-dir "$work/straight"
read -r n rest <<<"$(layout fsdp2)"
# shellcheck disable=SC2086
run first 2 "${common[@]}" $rest --set train.max_steps=80 --set train.checkpoint_every=20 --run-dir "$work/first"
[ -f "$(ck "$work/first" 40)/rank-00001.bin" ] || fail "FSDP 2's checkpoint is not sharded (no rank-00001.bin)"
for l in fsdp4 ddp4 one; do
  read -r n rest <<<"$(layout $l)"
  # shellcheck disable=SC2086
  run "cont_$l" "$n" --resume "$(ck "$work/first" 40)" --run-dir "$work/cont_$l" $rest --set train.max_steps=80
  grep -q "resumed from $(ck "$work/first" 40) (step 40," "$work/cont_$l.out" || fail "cont_$l did not resume at step 40"
  ! grep -q "note: the checkpoint was written with a global batch" "$work/cont_$l.out" ||
    fail "cont_$l: the same global batch was reported as a different one"
done
"$py" - "$work" <<'PY' || fail "a resumed trajectory left the uninterrupted one"
import json, sys
work = sys.argv[1]
def steps(run): return {r["step"]: r["loss"] for r in map(json.loads, open(f"{work}/{run}/metrics.jsonl")) if r["type"] == "train"}
base = steps("straight")
for run in ("cont_fsdp4", "cont_ddp4", "cont_one", "first"):
    got = steps(run)
    if run == "first": got = {s: l for s, l in got.items() if s > 40}
    if sorted(got) != list(range(41, 81)): sys.exit(f"{run} logged steps {sorted(got)[:3]}…, expected 41..80")
    worst = max(abs(got[s] - base[s]) / abs(base[s]) for s in got)
    print(f"{run}: steps 41-80 within {worst:.1e} of the uninterrupted run (tolerance 1e-5)")
    if worst > 1e-5: sys.exit(f"{run}: step losses differ by {worst:.1e}")
PY

# --- Round trip: each layout resumes the one before at step 80 and writes its own checkpoint there.
prev=$(ck "$work/straight" 80)
for l in fsdp4 ddp2 hsdp one; do
  read -r n rest <<<"$(layout $l)"
  # shellcheck disable=SC2086
  run "rt_$l" "$n" --resume "$prev" --run-dir "$work/rt_$l" $rest --set train.max_steps=80
  prev=$(ck "$work/rt_$l" 80)
  [ -f "$prev/index.json" ] || fail "rt_$l wrote no checkpoint at step 80"
done
"$bin/dtrain" ckpt inspect "$(ck "$work/rt_hsdp" 80)" >"$work/inspect.out"  # (grep -q on a pipe could cut it short)
grep -q "saved from: 4 ranks (pp 1 × dp_replicate 2 × dp_shard 2" "$work/inspect.out" ||
  fail "inspect does not show the HSDP layout"
same_checkpoints 80 straight rt_fsdp4 rt_ddp2 rt_hsdp rt_one
for r in straight rt_fsdp4 rt_ddp2 rt_hsdp rt_one; do
  "$bin/dtrain" ckpt inspect "$(ck "$work/$r" 80)" | grep "optimizer:" >"$work/export/$r.opt"
  cmp -s "$work/export/straight.opt" "$work/export/$r.opt" || fail "$r: optimizer step count differs"
done
echo "ok  round trip 1 → FSDP 4 → DDP 2 → HSDP 2×2 → 1: weights and optimizer state bit-identical"

# --- Damage: each one named, the previous checkpoint used instead.
damaged() {  # $1 = case name, $2 = what must be named; the damaged copy is $work/$1 (newest: step 40)
  read -r n rest <<<"$(layout fsdp2)"
  local rc=0
  # shellcheck disable=SC2086
  "$bin/dtrun" --standalone --nproc-per-node 2 "$bin/dtrain" train --resume "$work/$1" $rest --set train.max_steps=40 \
    >"$work/$1.out" 2>&1 || rc=$?
  [ "$rc" -eq 0 ] || { cat "$work/$1.out"; fail "$1: resuming past the damaged checkpoint failed"; }
  grep -q "checkpoint $(ck "$work/$1" 40) is damaged: .*$2.*using an older checkpoint" "$work/$1.out" ||
    { cat "$work/$1.out"; fail "$1: the damage was not named ($2)"; }
  grep -q "resumed from $(ck "$work/$1" 20) (step 20, epoch 1): the newest good checkpoint" "$work/$1.out" ||
    { cat "$work/$1.out"; fail "$1: did not fall back to step 20"; }
  echo "ok  $1: $(grep -o "is damaged: [^;]*" "$work/$1.out" | head -1 | cut -c1-150)"
}
copy_to_40() { cp -r "$work/first" "$work/$1"; rm -rf "$(ck "$work/$1" 60)" "$(ck "$work/$1" 80)"; }
copy_to_40 flipped
"$py" - "$(ck "$work/flipped" 40)" <<'PY'
import json, sys
d = sys.argv[1]
idx = json.load(open(f"{d}/index.json"))
c = max((c for t in idx["tensors"].values() for c in t["chunks"] if c["file"] == "rank-00001.bin"), key=lambda c: c["byte_size"])
with open(f"{d}/rank-00001.bin", "r+b") as f:
    f.seek(c["byte_offset"] + c["byte_size"] // 2); b = f.read(1); f.seek(-1, 1); f.write(bytes([b[0] ^ 0x10]))
PY
rc=0; "$bin/dtrain" ckpt verify "$(ck "$work/flipped" 40)" >/dev/null 2>"$work/verify.err" || rc=$?
[ "$rc" -ne 0 ] && grep -q "rank-00001.bin" "$work/verify.err" || fail "ckpt verify passed a flipped byte"
damaged flipped "rank-00001.bin: the chunk at bytes .* fails its checksum"
"$bin/dtrain" ckpt verify "$(ck "$work/first" 40)" >/dev/null || fail "ckpt verify failed a good checkpoint"
copy_to_40 truncated
truncate -s -1000 "$(ck "$work/truncated" 40)/rank-00000.bin"
damaged truncated "rank-00000.bin is [0-9]* bytes, the index says"
copy_to_40 noindex
rm "$(ck "$work/noindex" 40)/index.json"
damaged noindex "index.json is missing"
# None good: one line, non-zero.
rm "$(ck "$work/noindex" 20)/index.json"
rm -rf "$(ck "$work/noindex" 40)"
rc=0
"$bin/dtrun" --standalone --nproc-per-node 2 "$bin/dtrain" train --resume "$work/noindex" >"$work/none.out" 2>&1 || rc=$?
[ "$rc" -ne 0 ] && grep -q "dtrain: error: checkpoint $(ck "$work/noindex" 20) is damaged: .*index.json is missing.*; no good checkpoint is left in $work/noindex/checkpoints" "$work/none.out" ||
  { cat "$work/none.out"; fail "no good checkpoint: expected one error line"; }
# 64 flipped bytes in the middle of a full checkpoint's model.safetensors (one process).
cp -r "$work/straight" "$work/flip64"
"$py" -c 'import sys,os; p=sys.argv[1]; n=os.path.getsize(p); f=open(p,"r+b"); f.seek(n//2); b=f.read(64); f.seek(n//2); f.write(bytes(x ^ 0xff for x in b))' \
  "$work/flip64/model_final/model.safetensors"
expect_one_error "eval of a corrupt model_final" "model.safetensors: the chunk at bytes" \
  "$bin/dtrain" eval --checkpoint "$work/flip64/model_final"
expect_one_error "generate from a corrupt model_final" "fails its checksum" \
  "$bin/dtrain" generate --checkpoint "$work/flip64/model_final" --prompt the

# --- A job killed during an asynchronous save: the checkpoint before is intact and resumed from.
read -r n rest <<<"$(layout fsdp2)"
async=(--set train.checkpoint_async=true --set train.checkpoint_every=10 --set train.max_steps=40)
# shellcheck disable=SC2086
run async_straight 2 "${common[@]}" $rest "${async[@]}" --run-dir "$work/async_straight"
"$py" - "$work/async_straight/metrics.jsonl" <<'PY' || fail "asynchronous saves were not logged"
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
saves = [x for x in r if x["type"] == "checkpoint" and x["async"]]
written = [x for x in r if x["type"] == "checkpoint_written"]
if len(saves) < 4 or len(written) != len(saves): sys.exit(f"{len(saves)} async saves, {len(written)} written")
print(f"ok  async saves: stall {max(x['stall_seconds'] for x in saves) * 1000:.1f} ms at most, "
      f"writes {max(x['write_seconds'] for x in written) * 1000:.1f} ms at most")
PY
# shellcheck disable=SC2086
DTRAIN_TEST_CKPT_WRITE_DELAY_MS=4000 "$bin/dtrun" --standalone --nproc-per-node 2 "$bin/dtrain" train "${common[@]}" \
  $rest "${async[@]}" --run-dir "$work/killed" >"$work/killed.out" 2>&1 &
agent=$!
pids+=("$agent")
wait_for 120 test -d "$(ck "$work/killed" 10)" || { cat "$work/killed.out"; fail "the first async save never landed"; }
wait_for 60 compgen -G "$(ck "$work/killed" 20).staging.*" >/dev/null || { cat "$work/killed.out"; fail "no second save"; }
kill -9 "$(worker_pid "$agent" 0)" "$(worker_pid "$agent" 1)"
wait "$agent" || true
[ ! -d "$(ck "$work/killed" 20)" ] || fail "the killed save left a step_20 checkpoint"
"$bin/dtrain" ckpt verify "$(ck "$work/killed" 10)" >/dev/null || fail "the checkpoint before the kill is damaged"
# shellcheck disable=SC2086
run killed_resume 2 --resume "$work/killed" $rest
grep -q "resumed from $(ck "$work/killed" 10) (step 10," "$work/killed_resume.out" ||
  { cat "$work/killed_resume.out"; fail "did not resume from the save before the kill"; }
"$py" "$src/tests/python/compare_weights.py" "$work/async_straight/model_final" "$work/killed/model_final" 0 \
  "killed during an async save vs uninterrupted" || fail "the run resumed after the kill ended with other weights"

# --- Export to PyTorch, import back.
"$bin/dtrain" ckpt export "$work/straight/model_final" --out "$work/exp/model.safetensors" >/dev/null
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  "$bin/dtrain" debug dump "${common[@]}" --set train.batch_size=4 --set train.init_from="$work/straight/model_final" \
    --out "$work/dump" --steps 1 >/dev/null
  /usr/bin/python3 "$src/tests/python/check_export.py" "$work/exp/model.safetensors" "$work/exp/model.config.json" \
    "$work/dump" 1e-5 || fail "PyTorch's logits from the exported weights differ from dtrain's"
else
  echo "skip: the PyTorch half of the export check (/usr/bin/python3 has no torch: install python3-torch)"
fi
"$bin/dtrain" ckpt import "$work/exp/model.safetensors" --config "$work/exp/model.config.json" --out "$work/imported" \
  --vocab "$work/data/vocab.txt" >/dev/null
for from in imported original; do
  w=$work/imported; [ $from = original ] && w=$work/straight/model_final
  run "ft_$from" 1 "${common[@]}" --set train.batch_size=8 --set train.max_steps=10 --set train.init_from="$w" \
    --run-dir "$work/ft_$from"
done
losses() { grep '"train"' "$1" | grep -o '"\(step\|loss\|lr\)":[^,}]*'; }  # no timings
cmp -s <(losses "$work/ft_imported/metrics.jsonl") <(losses "$work/ft_original/metrics.jsonl") ||
  fail "training from the imported weights gives other losses than from the original checkpoint"
echo "PASS: round trip, continuation at FSDP 4 / DDP 4 / 1 process, damage fallback, async kill, export, import"
