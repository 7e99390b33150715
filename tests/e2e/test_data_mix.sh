#!/usr/bin/env bash
# data.mix over two folders of token shards (one SentencePiece tokenizer, several shards each): the
# mixed run at 2 ranks is reproduced by one stopped at step 10 and resumed at 1 rank, and by one
# stopped at 1 rank and resumed at 2 (losses, validation per source, weights; dropout on, across an
# epoch end); data.stage copies each source once and trains the same; dtrain data stage by hand; eval
# and generate of a mixed run's checkpoint; data.document_boundaries; and the refusals: a negative or
# zero weight, a source of another tokenizer, a stage target without room.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to compare losses and weights"
d="$bin/dtrain"
# the tokenizer, and source A (the built-in corpus's split files) and B (its lines, words reversed,
# split by a seeded hash of each line), in shards of a few thousand tokens
"$d" data tokenizer train --input "$work/data/text/train.txt" --vocab-size 800 --out "$work/sp.model" >/dev/null
"$d" data prepare --tokenizer "$work/sp.model" --input "$work/data/text" --out "$work/a" --shard-tokens 4000 >/dev/null 2>&1
"$py" -c "import sys; [print(' '.join(reversed(l.split()))) for l in open(sys.argv[1])]" "$work/data/text/train.txt" >"$work/b.txt"
"$d" data prepare --tokenizer "$work/sp.model" --input "$work/b.txt" --docs-by line --valid-fraction 0.1 \
  --test-fraction 0.1 --out "$work/b" --shard-tokens 3000 >/dev/null 2>&1
for s in a b; do
  [ "$(ls "$work/$s/train"/shard-*.bin | wc -l)" -gt 2 ] || fail "source $s should span several shards"
done
# a stride that makes an epoch of the mix (the sources' train windows together) end near step 12
stride=$("$py" - "$work" <<'PYEOF'
import json, sys
tokens = [json.load(open(f"{sys.argv[1]}/{s}/train/manifest.json"))["tokens"] for s in "ab"]
for s in range(8, 4000):
    n = sum((t - 33) // s + 1 for t in tokens)
    if n % 16 and 11 <= -(-n // 16) <= 13:
        print(s); break
PYEOF
)
mix="[{\"dir\": \"$work/a\", \"weight\": 0.7}, {\"dir\": \"$work/b\", \"weight\": 0.3}]"
steps=20
common=(--config "$src/configs/quickstart.toml" --set data.mix="$mix" --set model.dim=32 --set model.heads=2
  --set model.layers=2 --set model.ff_dim=64 --set model.seq_len=32 --set data.stride="$stride"
  --set train.log_every=1 --set train.progress=false --set train.eval_max_batches=2 --set train.eval_every=10
  --set optim.name=sgd --set optim.momentum=0.9 --set train.lr=0.05 --set optim.warmup_steps=0
  --set optim.schedule=constant --set train.threads=1 --set train.global_batch=16)

run_ranks straight 2 --set train.batch_size=8 --set train.max_steps=$steps
grep -q "mixed from 2 sources" "$work/straight.out" || fail "the run should say it mixes 2 sources: $(head -5 "$work/straight.out")"
per_epoch=$(grep -o "[0-9]* steps/epoch" "$work/straight.out" | head -1 | grep -o "^[0-9]*")
[ "$per_epoch" -lt "$steps" ] || fail "the runs should cross an epoch end ($per_epoch steps/epoch)"
"$py" - "$work/straight/metrics.jsonl" "$work/a" "$work/b" <<'PYEOF'
import json, sys
vals = [r for r in map(json.loads, open(sys.argv[1])) if r["type"] == "val"]
assert vals, "no validation record"
for r in vals:
    src = r.get("sources", {})
    assert set(src) == set(sys.argv[2:]), f"validation should be per source: {r}"
    rows = sum(s["rows"] for s in src.values())
    mean = sum(s["loss"] * s["rows"] for s in src.values()) / rows
    assert abs(mean - r["loss"]) < 1e-9 * abs(mean), f"the mix's loss is the sources' token-weighted mean: {r}"
print(f"ok  validation per source at steps {[r['step'] for r in vals]}")
PYEOF

# stopped at step 10 at one size, resumed at the other
run_ranks shrink 2 --set train.batch_size=8 --set train.max_steps=10
"$d" train --resume "$work/shrink" --set train.max_steps=$steps >"$work/shrink.resume.out" 2>&1 ||
  { cat "$work/shrink.resume.out"; fail "the 1-rank resume failed"; }
run_one grow --set train.batch_size=8 --set train.max_steps=10
"$bin/dtrun" --standalone --nproc-per-node 2 "$d" train --resume "$work/grow" --set train.max_steps=$steps \
  >"$work/grow.resume.out" 2>&1 || { cat "$work/grow.resume.out"; fail "the 2-rank resume failed"; }
for r in shrink grow; do
  grep -q "resumed from $work/$r/checkpoints/step_000000010 (step 10," "$work/$r.resume.out" ||
    fail "$r did not resume from step 10: $(head -3 "$work/$r.resume.out")"
done
"$py" "$src/tests/python/compare_losses.py" "$work" "$steps" straight:shrink:1e-5 straight:grow:1e-5 ||
  fail "a mixed run resumed at another data-parallel size left the trajectory"
same_weights straight shrink 1e-5
same_weights straight grow 1e-5
# every checkpoint records each source's position; the same at every size
"$py" - "$work" <<'PYEOF'
import json, sys
def sources(path):
    t = json.load(open(f"{sys.argv[1]}/{path}/trainer.json"))
    return t["data_sources"]
# the epoch's end (after the resume: 1 rank in shrink, 2 in grow), and the end of the run
steps = sorted(p.name for p in __import__("pathlib").Path(f"{sys.argv[1]}/shrink/checkpoints").iterdir())
at10 = sources(f"shrink/checkpoints/{steps[0]}")
assert sources(f"grow/checkpoints/{steps[0]}") == at10, f"the position at {steps[0]} differs at 1 and 2 ranks"
ref = sources(f"straight/checkpoints/{steps[-1]}")
for run in ("straight", "shrink", "grow"):
    assert sources(f"{run}/checkpoints/{steps[0]}") == at10, f"{run}: the position at {steps[0]} differs"
    assert sources(f"{run}/checkpoints/{steps[-1]}") == ref, f"{run}: the position at {steps[-1]} differs"
assert len(ref) == 2 and ref[0]["weight"] == 0.7 and ref[0]["drawn"] > ref[1]["drawn"] > 0, ref
assert all(a["drawn"] < b["drawn"] for a, b in zip(at10, ref)), (at10, ref)
print(f"ok  each source's position in the checkpoints, the same at 1 and 2 ranks: {[s['drawn'] for s in ref]}")
PYEOF

# the checkpoint keeps the tokenizer; eval (on the mix it trained on) and generate read it
[ -f "$work/straight/model_final/tokenizer.model" ] && cmp -s "$work/straight/model_final/tokenizer.model" "$work/sp.model" ||
  fail "the checkpoint should keep the data's tokenizer.model"
"$d" eval --checkpoint "$work/straight/model_final" >"$work/eval.out" || fail "eval of a mixed run's checkpoint failed"
grep -q "^test loss: " "$work/eval.out" || fail "eval printed: $(cat "$work/eval.out")"
"$d" generate --checkpoint "$work/straight/model_final" --prompt "the license" --tokens 5 >"$work/gen.out" ||
  fail "generate failed"
[[ $(head -c 11 "$work/gen.out") == "the license" ]] || fail "generate should continue the prompt: $(cat "$work/gen.out")"
echo "ok  eval and generate read the kept tokenizer"

# data.stage: each source copied once to the stage, the same steps; a second run finds the copies
run_ranks staged 2 --set train.batch_size=8 --set train.max_steps=$steps --set data.stage="$work/stage"
# (either local rank may be the one that copies: the other waits and finds the copy)
[ "$(grep -cE "(staged to|already staged at) $work/stage/" "$work/staged.out")" -eq 2 ] ||
  fail "rank 0 should report both sources staged: $(head -5 "$work/staged.out")"
[ "$(ls -d "$work/stage"/* | wc -l)" -eq 4 ] || fail "the stage should hold a copy and a lock per source: $(ls "$work/stage")"
[ -f "$work/stage/a/train/shard-00000.bin" ] && [ -f "$work/stage/b/tokenizer.model" ] || fail "no staged copies"
"$py" "$src/tests/python/compare_losses.py" "$work" "$steps" straight:staged:0 || fail "the staged run trained otherwise"
run_one staged2 --set train.batch_size=8 --set train.max_steps=1 --set data.stage="$work/stage"
[ "$(grep -c "already staged at $work/stage/" "$work/staged2.out")" -eq 2 ] || fail "the copies should be reused"
"$d" data stage "$work/a" --to "$work/hand" | grep -q "^staged to $work/hand/a (" || fail "data stage by hand"
"$d" data stage "$work/a" --to "$work/hand" | grep -q "^already staged at $work/hand/a" || fail "data stage reuse"
"$d" data verify "$work/hand/a" >/dev/null || fail "the staged copy does not verify"
# a folder of the same name that staging did not make is never replaced; the data folder itself
mkdir -p "$work/mine/a" && echo keep >"$work/mine/a/notes.txt"
expect_one_error "a folder of the user's" "is there and is not a copy dtrain staged" "$d" data stage "$work/a" --to "$work/mine"
[ "$(cat "$work/mine/a/notes.txt")" = keep ] || fail "the user's folder was touched"
expect_one_error "staging onto itself" "the data folder itself" "$d" data stage "$work/a" --to "$work"
expect_one_error "staging inside" "is inside the data folder" "$d" data stage "$work/a" --to "$work/a/stage"
[ ! -e "$work/a/stage" ] || fail "a refused stage made its target inside the data folder"
"$d" data verify "$work/a" >/dev/null || fail "the data folder was touched"
echo "ok  staging: once per source, reused, the same trajectory"
if unshare -m true 2>/dev/null; then
  mkdir -p "$work/small"
  rc=0
  unshare -m bash -c "mount -t tmpfs -o size=64k tmpfs '$work/small' && '$d' data stage '$work/a' --to '$work/small'" \
    >"$work/small.out" 2>"$work/small.err" || rc=$?
  [ $rc -eq 2 ] && grep -q "dtrain: error: data stage: $work/small has 0.1 MiB free but the data needs 0.4 MiB" "$work/small.err" ||
    fail "a stage without room should be one line (rc $rc): $(cat "$work/small.err")"
  echo "ok  $(cut -c1-150 "$work/small.err")"
else
  echo "note: no mount namespace here (unshare -m): the stage-without-room case is not run"
fi

# document boundaries: windows within documents (B's lines are short: a smaller window)
run_one bounded --set train.batch_size=8 --set train.max_steps=3 --set data.document_boundaries=true \
  --set model.seq_len=8 --set data.stride=4
expect_one_error "boundaries on word-level data" "without a document index" "$d" train "${common[@]}" \
  --set data.mix="[]" --set data.dir="$work/data" --set data.document_boundaries=true --run-dir "$work/bad1"

# refusals
"$d" data tokenizer train --input "$work/data/text/valid.txt" --vocab-size 500 --out "$work/other.model" >/dev/null
"$d" data prepare --tokenizer "$work/other.model" --input "$work/data/text" --out "$work/c" >/dev/null 2>&1
expect_one_error "negative weight" "weights are numbers ≥ 0" "$d" train "${common[@]}" \
  --set data.mix="[{\"dir\": \"$work/a\", \"weight\": -1}]" --run-dir "$work/bad2"
expect_one_error "weights sum to zero" "the weights sum to zero" "$d" train "${common[@]}" \
  --set data.mix="[{\"dir\": \"$work/a\", \"weight\": 0}]" --run-dir "$work/bad3"
expect_one_error "another tokenizer" "prepare every source of a mix with one tokenizer" "$d" train "${common[@]}" \
  --set data.mix="[{\"dir\": \"$work/a\", \"weight\": 1}, {\"dir\": \"$work/c\", \"weight\": 1}]" --run-dir "$work/bad4"
expect_one_error "eval on other data" "another tokenizer" "$d" eval --checkpoint "$work/straight/model_final" --data "$work/c"
expect_one_error "mix not a list" "is not a list of sources" "$d" train "${common[@]}" --set data.mix=3 --run-dir "$work/bad5"
echo "PASS: a mixed, sharded run resumed at another data-parallel size reproduces the uninterrupted one; staging; refusals"
