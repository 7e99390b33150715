#!/usr/bin/env bash
# DDP equivalence: N ranks with per-rank batch B/N (launched by dtrun) end with the same weights as
# one rank with batch B after 50 steps (f32, dropout on, relative 1e-5), for N = 2 and 4, across an
# epoch end whose last step holds one sample (at 4 ranks three step with a filler); gradient
# accumulation (4 micro-steps of B/4) matches too; per-step losses agree; only rank 0 writes.
# Weights are compared under SGD with momentum, whose update is linear in the gradient: AdamW
# turns pure rounding noise (the attention key bias has a zero gradient in exact arithmetic) into
# full-size steps, so under AdamW only the loss trajectory is compared (relative 1e-4).
source "$2/tests/e2e/lib.sh" "$1" "$2" "to compare weights"
steps=50
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=64
  --set model.heads=4 --set model.layers=2 --set model.ff_dim=256 --set model.seq_len=32
  --set data.stride="$(epoch_stride 32 16 $steps)" --set train.max_steps=$steps --set train.log_every=1 --set train.progress=false
  --set train.eval_max_batches=4 --set train.checkpoint_every=25 --set parallel.bucket_mb=0.5
  --set optim.name=sgd --set optim.momentum=0.9 --set train.lr=0.02 --set optim.warmup_steps=0)
run_one single --set train.batch_size=16 --set train.threads=2
run_ranks ddp2 2 --set train.batch_size=8 --set train.threads=1
run_ranks ddp4 4 --set train.batch_size=4 --set train.threads=1
run_one accum --set train.batch_size=4 --set train.grad_accum=4 --set train.threads=2
adamw=(--set optim.name=adamw --set train.lr=0.002)
run_one single_adamw --set train.batch_size=16 --set train.threads=2 "${adamw[@]}"
run_ranks ddp2_adamw 2 --set train.batch_size=8 --set train.threads=1 "${adamw[@]}"

for r in ddp2 ddp4 accum; do
  "$py" "$src/tests/python/compare_weights.py" "$work/single/model_final" "$work/$r/model_final" 1e-5 "$r vs 1 rank" ||
    fail "$r does not reproduce the one-rank trajectory"
done
grep -q "gradient buckets" "$work/ddp4.out" || fail "ddp4 did not report its buckets"
grep -q "^\[0\]: data parallel: 4 ranks" "$work/ddp4.out" || fail "ddp4 did not report its allreduce time"
if grep -q "^\[[123]\]: \[1/" "$work/ddp4.out"; then fail "a rank other than 0 printed the epoch line"; fi
[ "$(ls "$work/ddp4/checkpoints")" = "$(ls "$work/single/checkpoints")" ] || fail "ddp4 checkpoints differ in name"

"$py" "$src/tests/python/compare_losses.py" "$work" "$steps" single:ddp2:1e-5 single:ddp4:1e-5 single:accum:1e-5 \
  single_adamw:ddp2_adamw:1e-4 || fail "a data-parallel run's losses differ from one rank's"
echo "PASS: 2 and 4 ranks and 4 micro-steps reproduce the one-rank run"
