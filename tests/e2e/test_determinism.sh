#!/usr/bin/env bash
# Determinism: same seed and thread count -> bit-identical per-step losses and final weights;
# 1 vs 2 threads -> every step loss within 1e-6 relative; another seed -> different losses.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to compare metrics"
steps=30
# dim 64 / ff 256 / seq 32 so that the 2-thread run really splits its loops; dropout 0.1 (preset).
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=64
  --set model.heads=4 --set model.layers=1 --set model.ff_dim=256 --set model.seq_len=32
  --set train.batch_size=16 --set data.stride=32 --set train.max_steps=$steps --set train.log_every=1
  --set train.progress=false --set train.eval_max_batches=4)
run() {  # $1 = name, then extra --set pairs
  local name=$1; shift
  "$bin/dtrain" train "${common[@]}" "$@" --run-dir "$work/$name" >"$work/$name.out" 2>&1 ||
    { cat "$work/$name.out"; fail "run $name failed"; }
}
run t2a --set train.threads=2
run t2b --set train.threads=2
run t1a --set train.threads=1
run t1b --set train.threads=1
run seed2 --set train.threads=1 --set train.seed=2

"$py" - "$work" "$steps" <<'EOF'
import json, sys
work, steps = sys.argv[1], int(sys.argv[2])
def losses(name):
    recs = [json.loads(l) for l in open(f"{work}/{name}/metrics.jsonl")]
    st = [(r["step"], r["loss"]) for r in recs if r["type"] == "train"]
    if [s for s, _ in st] != list(range(1, steps + 1)):
        sys.exit(f"FAIL: {name} logged steps {[s for s, _ in st]}, expected 1..{steps}")
    threads = json.load(open(f"{work}/{name}/summary.json"))["threads"]
    return [l for _, l in st], threads
t2a, n2a = losses("t2a"); t2b, n2b = losses("t2b"); t1a, n1a = losses("t1a"); t1b, n1b = losses("t1b")
s2, _ = losses("seed2")
if (n2a, n2b, n1a, n1b) != (2, 2, 1, 1):
    sys.exit(f"FAIL: summary.json threads should be 2, 2, 1, 1; saw {n2a}, {n2b}, {n1a}, {n1b}")
for x, y, what in ((t2a, t2b, "2 threads"), (t1a, t1b, "1 thread")):
    bad = [i + 1 for i in range(steps) if x[i] != y[i]]
    if bad:
        i = bad[0] - 1
        sys.exit(f"FAIL: same seed, {what}: step losses should be bit-identical; {len(bad)} differ, "
                 f"first at step {i + 1}: {x[i]!r} vs {y[i]!r}")
worst = max(abs(a - b) / abs(b) for a, b in zip(t1a, t2a))
if worst > 1e-6:
    i = max(range(steps), key=lambda i: abs(t1a[i] - t2a[i]) / abs(t2a[i]))
    sys.exit(f"FAIL: 1 vs 2 threads: step losses should agree within 1e-6 relative; step {i + 1}: "
             f"{t1a[i]!r} vs {t2a[i]!r} (rel {worst:.3g})")
same = sum(a == b for a, b in zip(t1a, s2))
if same > 1:
    sys.exit(f"FAIL: seed 2 should give different step losses than seed 1, but {same} of {steps} are equal")
if not t1a[-1] < t1a[0]:
    sys.exit(f"FAIL: loss should fall over {steps} steps: {t1a[0]} -> {t1a[-1]}")
exact = sum(a == b for a, b in zip(t1a, t2a))
print(f"same seed: {steps} step losses bit-identical (1 and 2 threads); 1 vs 2 threads: max rel diff "
      f"{worst:.3g} ({exact}/{steps} bit-identical); seed 2 differs")
EOF

for pair in "t2a t2b" "t1a t1b"; do
  set -- $pair
  for f in model_final/model.safetensors checkpoints/step_$(printf '%09d' $steps)/optimizer.safetensors; do
    cmp -s "$work/$1/$f" "$work/$2/$f" || fail "same seed and threads ($1 vs $2): $f should be byte-identical"
  done
done
! cmp -s "$work/t1a/model_final/model.safetensors" "$work/seed2/model_final/model.safetensors" ||
  fail "seed 2 should give different final weights than seed 1"
echo "same seed and threads: final weights and optimizer state byte-identical"
echo "PASS"
