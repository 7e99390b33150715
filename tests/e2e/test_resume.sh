#!/usr/bin/env bash
# Exact resume: 2k steps straight == k steps + `train --resume` to 2k (dropout on), bit for bit, for a
# resume point mid-epoch and one at an epoch boundary, and in bf16 (whose products read the weights'
# bf16 copy, which a load must refresh); resuming a run dir without checkpoints starts afresh.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to compare metrics and tensors"
# 129 windows of 16 tokens, batch 16: 9 steps per epoch, the last one a partial batch of 1 row.
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=32
  --set model.heads=2 --set model.layers=1 --set model.ff_dim=64 --set model.seq_len=16
  --set train.batch_size=16 --set data.stride=256 --set train.epochs=10 --set train.threads=1
  --set train.progress=false --set train.log_every=1 --set train.keep_checkpoints=10)

# Tensor-by-tensor comparison of two safetensors files (names, dtypes, shapes, bytes), for diagnosis.
compare_tensors() {
  "$py" - "$1" "$2" <<'EOF'
import json, struct, sys
def load(p):
    b = open(p, "rb").read()
    (n,) = struct.unpack("<Q", b[:8])
    h = json.loads(b[8:8 + n]); h.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) for k, v in h.items()}
a, b = load(sys.argv[1]), load(sys.argv[2])
if sorted(a) != sorted(b): sys.exit(f"tensor names differ: {sorted(set(a) ^ set(b))}")
bad = []
for k in sorted(a):
    if a[k][:2] != b[k][:2]: bad.append(f"{k}: {a[k][:2]} vs {b[k][:2]}"); continue
    if a[k][2] != b[k][2]:
        x = struct.unpack(f"<{len(a[k][2]) // 4}f", a[k][2]); y = struct.unpack(f"<{len(b[k][2]) // 4}f", b[k][2])
        bad.append(f"{k}: max abs diff {max(abs(p - q) for p, q in zip(x, y)):.3g}")
if bad: sys.exit("tensors differ: " + "; ".join(bad[:5]))
print(f"{len(a)} tensors identical")
EOF
}

per_epoch=""
check_case() {  # $1 = name, $2 = k, then settings of both runs
  local name=$1 k=$2 a="$work/$1_A" b="$work/$1_B"
  local n=$((2 * k))
  local common=("${common[@]}" "${@:3}")
  "$bin/dtrain" train "${common[@]}" --set train.max_steps=$n --set train.checkpoint_every=$k --run-dir "$a" \
    >"$a.out" 2>&1 || { cat "$a.out"; fail "$name: straight run of $n steps failed"; }
  "$bin/dtrain" train "${common[@]}" --set train.max_steps=$k --set train.checkpoint_every=$k --run-dir "$b" \
    >"$b.out" 2>&1 || { cat "$b.out"; fail "$name: first $k steps failed"; }
  "$bin/dtrain" train --resume "$b" --set train.max_steps=$n >"$b.resume.out" 2>&1 ||
    { cat "$b.resume.out"; fail "$name: --resume to $n steps failed"; }
  local ck
  ck=$(printf 'step_%09d' "$k")
  grep -q "resumed from $b/checkpoints/$ck (step $k," "$b.resume.out" ||
    fail "$name: expected 'resumed from …/checkpoints/$ck (step $k, …', saw: $(head -1 "$b.resume.out")"

  # Dropout is on (as in the presets), so the exactness covers the dropout masks too.
  "$py" -c 'import json,sys; d=json.load(open(sys.argv[1]))["model"]["dropout"]; sys.exit(0 if d > 0 else f"dropout {d}")' \
    "$b/config.json" || fail "$name: expected model.dropout > 0 in the resumed run's config.json"

  # Final weights byte-identical (header metadata holds only the model config, equal in both).
  if ! cmp -s "$a/model_final/model.safetensors" "$b/model_final/model.safetensors"; then
    compare_tensors "$a/model_final/model.safetensors" "$b/model_final/model.safetensors" || true
    fail "$name: model_final/model.safetensors of the straight and the resumed run differ"
  fi
  # Weights moved between step k and step 2k (so the comparison above is not trivially true).
  ! cmp -s "$a/checkpoints/$ck/model.safetensors" "$a/model_final/model.safetensors" ||
    fail "$name: weights at step $k and step $n are identical: training did not move them"
  # Optimizer state and trainer position at step 2k identical too.
  local cn
  cn=$(printf 'step_%09d' "$n")
  cmp -s "$a/checkpoints/$cn/optimizer.safetensors" "$b/checkpoints/$cn/optimizer.safetensors" ||
    fail "$name: checkpoints/$cn/optimizer.safetensors differ between straight and resumed run"

  # Per-step losses and the epoch-end losses at common steps identical; trainer positions equal.
  "$py" - "$a" "$b" "$n" "$cn" <<'EOF' || fail "$name: metrics or trainer state differ (see above)"
import json, sys
a, b, n, cn = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
def recs(d): return [json.loads(l) for l in open(f"{d}/metrics.jsonl")]
ra, rb = recs(a), recs(b)
ta = {r["step"]: r["loss"] for r in ra if r["type"] == "train"}
tb = [(r["step"], r["loss"]) for r in rb if r["type"] == "train"]
if sorted(ta) != list(range(1, n + 1)): sys.exit(f"straight run logged steps {sorted(ta)}, expected 1..{n}")
if [s for s, _ in tb] != list(range(1, n + 1)): sys.exit(f"resumed run logged steps {[s for s, _ in tb]}, expected 1..{n} once each")
diff = [(s, ta[s], l) for s, l in tb if ta[s] != l]
if diff: sys.exit(f"per-step losses differ at {len(diff)} steps, first: step {diff[0][0]}: {diff[0][1]!r} vs {diff[0][2]!r}")
ea = {r["step"]: r for r in ra if r["type"] == "epoch"}
eb = {r["step"]: r for r in rb if r["type"] == "epoch"}
common = sorted(set(ea) & set(eb))
if n not in common: sys.exit(f"no epoch record at the final step {n} in both runs (straight {sorted(ea)}, resumed {sorted(eb)})")
for s in common:
    for k in ("epoch", "train_loss", "val_loss"):
        if ea[s][k] != eb[s][k]: sys.exit(f"epoch record at step {s}: {k} {ea[s][k]!r} vs {eb[s][k]!r}")
sa = json.load(open(f"{a}/checkpoints/{cn}/trainer.json")); sb = json.load(open(f"{b}/checkpoints/{cn}/trainer.json"))
for k in ("global_step", "epoch", "batch_in_epoch", "epoch_loss_sum", "train_tokens"):
    if sa[k] != sb[k]: sys.exit(f"trainer.json {k}: {sa[k]!r} vs {sb[k]!r}")
print(f"{n} per-step losses identical; epoch records at steps {common} identical")
EOF
  echo "$name (k=$k, $n steps): model_final, optimizer state and per-step losses identical"
}

check_case midepoch 6   # resume at step 6 of a 9-step epoch; 12 steps cross the boundary
per_epoch=$(grep -Eo '[0-9]+ steps/epoch' "$work/midepoch_A.out" | grep -Eo '^[0-9]+')
[ "$per_epoch" -eq 9 ] || fail "expected 9 steps/epoch with these settings, saw '$per_epoch'"
grep -q "^\[1/10\] Train loss: .*(partial epoch)" "$work/midepoch_B.out" ||
  fail "a stop at step 6 of 9 should print a partial-epoch course line"
check_case boundary "$per_epoch"   # resume exactly at the end of epoch 1; 18 steps = 2 epochs
grep -q "(step $per_epoch, epoch 2)" "$work/boundary_B.resume.out" ||
  fail "resume at the epoch boundary should continue in epoch 2, saw: $(head -1 "$work/boundary_B.resume.out")"
check_case bf16 4 --set train.precision=bf16   # the weights' bf16 copy refreshed by the load

# A run dir without checkpoints (config.json only, as a run killed before its first checkpoint
# leaves; then also a leftover staging folder): --resume starts it afresh and says so.
for variant in none staging; do
  empty="$work/nockpt_$variant"
  mkdir -p "$empty"
  cp "$work/midepoch_A/config.json" "$empty/"
  if [ $variant = staging ]; then mkdir -p "$empty/checkpoints/step_000000003.staging.12345"; fi
  "$bin/dtrain" train --resume "$empty" --set train.max_steps=3 >"$work/nock.out" 2>&1 ||
    { cat "$work/nock.out"; fail "resume without checkpoints ($variant) should start afresh"; }
  grep -q "^run dir $empty has no checkpoint yet (its run stopped before the first one): starting it afresh" \
    "$work/nock.out" || fail "resume without checkpoints ($variant) should say it starts afresh, saw: $(head -1 "$work/nock.out")"
  ! grep -q "resumed from" "$work/nock.out" || fail "resume without checkpoints ($variant) claimed to resume"
  [ -s "$empty/checkpoints/step_000000003/model.safetensors" ] ||
    fail "resume without checkpoints ($variant) should train to step 3 and checkpoint there"
  [ ! -e "$empty/checkpoints/step_000000003.staging.12345" ] || fail "the leftover staging folder ($variant) was not pruned"
  echo "resume without checkpoints ($variant): $(head -1 "$work/nock.out")"
done
echo "PASS"
