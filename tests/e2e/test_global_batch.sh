#!/usr/bin/env bash
# train.global_batch: one rank (4 micro-steps of 4) and two ranks (1 micro-step of 8) of global batch
# 16 take the same steps (f32, dropout on, across an epoch end with a one-sample last step); a 2-rank run stopped at step 10 and resumed at 1 rank (the
# shrink an elastic job makes) ends as the uninterrupted 2-rank run does; a dp that does not divide
# the global batch, and global_batch beside grad_accum, are one line; an elastic job's mesh gives way
# in its data-parallel dimensions. Weights under SGD with momentum.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to compare losses and weights"
steps=20
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=32
  --set model.heads=2 --set model.layers=2 --set model.ff_dim=64 --set model.seq_len=32
  --set data.stride="$(epoch_stride 32 16 $steps)" --set train.log_every=1 --set train.progress=false --set train.eval_max_batches=2
  --set optim.name=sgd --set optim.momentum=0.9 --set train.lr=0.05 --set optim.warmup_steps=0
  --set optim.schedule=constant --set train.threads=1 --set train.global_batch=16)

# (a) the same global batch at 1 and 2 ranks, whatever the per-rank bound makes of it
run_one one --set train.batch_size=4 --set train.max_steps=$steps
run_ranks two 2 --set train.batch_size=8 --set train.max_steps=$steps
grep -q "global batch 16 = 1 data-parallel rank × 4 samples × 4 micro-steps" "$work/one.out" ||
  fail "one rank did not print its split: $(head -3 "$work/one.out")"
grep -q "^\[0\]: global batch 16 = 2 data-parallel ranks × 8 samples × 1 micro-step" "$work/two.out" ||
  fail "two ranks did not print their split: $(head -3 "$work/two.out")"
[ "$(grep -c "global batch 16 =" "$work/two.out")" -eq 1 ] || fail "only rank 0 should print the split"
per_epoch=$(grep -o "[0-9]* steps/epoch" "$work/one.out" | grep -o "^[0-9]*")
[ "$per_epoch" -lt "$steps" ] || fail "the runs should cross an epoch end ($per_epoch steps/epoch)"
grep -q '"global_batch": 16' "$work/two/config.json" && grep -q '"batch_size": 8' "$work/two/config.json" ||
  fail "config.json should keep train.global_batch and batch_size as given"
"$py" "$src/tests/python/compare_losses.py" "$work" "$steps" one:two:1e-5 || fail "1 and 2 ranks' losses differ"
same_weights one two 1e-5

# (b) 2 ranks to step 10, then `--resume` at 1 rank to step 20: the uninterrupted 2-rank run's
# losses (steps 11..20 are the resumed ones) and weights
run_ranks half 2 --set train.batch_size=8 --set train.max_steps=10
"$bin/dtrain" train --resume "$work/half" --set train.max_steps=$steps \
  >"$work/half.resume.out" 2>&1 || { cat "$work/half.resume.out"; fail "the 1-rank resume failed"; }
grep -q "resumed from $work/half/checkpoints/step_000000010 (step 10," "$work/half.resume.out" ||
  fail "did not resume from step 10: $(head -3 "$work/half.resume.out")"
grep -q "global batch 16 = 1 data-parallel rank × 8 samples × 2 micro-steps" "$work/half.resume.out" ||
  fail "the resumed run did not split the global batch for 1 rank"
if grep -q "trajectory differs" "$work/half.resume.out"; then fail "the resumed run says: $(grep differs "$work/half.resume.out")"; fi
"$py" "$src/tests/python/compare_losses.py" "$work" "$steps" two:half:1e-5 || fail "the shrunk run's losses differ"
same_weights two half 1e-5

# (c) a data-parallel size that does not divide the global batch: one line (said once), non-zero exit
rc=0
"$bin/dtrun" --standalone --nproc-per-node 2 "$bin/dtrain" train "${common[@]}" --set train.global_batch=15 \
  --set train.batch_size=8 --set train.max_steps=2 --run-dir "$work/odd" >"$work/odd.out" 2>&1 || rc=$?
[ $rc -ne 0 ] && [ "$(grep -c "train.global_batch = 15 does not split over 2 data-parallel ranks: give a multiple of 2 (14 or 16)" "$work/odd.out")" -eq 1 ] ||
  fail "global_batch 15 over 2 ranks should be one error line, saw rc $rc: $(cat "$work/odd.out")"
echo "ok  $(grep -o "dtrain: error: .*" "$work/odd.out" | cut -c1-120)"

# (d) global_batch and grad_accum both set
expect_one_error "global_batch with grad_accum" "train.global_batch = 16 and train.grad_accum = 2 both set the micro-steps" \
  "$bin/dtrain" train "${common[@]}" --set train.grad_accum=2 --set train.max_steps=2 --run-dir "$work/both"
# (e) an elastic job's workers (DTRAIN_ELASTIC, set by dtrun --nnodes MIN:MAX) whose world no longer
# makes parallel.*: FSDP over 4 asked for, 2 ranks left, tp and pp kept, sharded over the 2
DTRAIN_ELASTIC=1:2 "$bin/dtrun" --standalone --nproc-per-node 2 "$bin/dtrain" train "${common[@]}" \
  --set parallel.dp_shard=4 --set train.batch_size=8 --set train.max_steps=2 --run-dir "$work/elastic" \
  >"$work/elastic.out" 2>&1 || { cat "$work/elastic.out"; fail "the elastic 2-rank run failed"; }
grep -qF "[0]: elastic job: parallel.* asked for pp 1 × dp_replicate -1 × dp_shard 4 × tp 1, which does not make this world of 2 ranks: running as pp 1 × dp_replicate 1 × dp_shard 2 × tp 1" \
  "$work/elastic.out" || fail "the elastic run did not name its fallback shape: $(head -5 "$work/elastic.out")"
grep -q "fully sharded: FULL_SHARD over 2 ranks" "$work/elastic.out" || fail "the elastic run did not shard over 2 ranks"
echo "ok  $(grep -o "elastic job: .*" "$work/elastic.out")"

echo "PASS: global batch 16 at 1 and 2 ranks, and shrunk from 2 to 1 on resume, takes the same steps"
