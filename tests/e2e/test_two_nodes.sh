#!/usr/bin/env bash
# Two nodes for real: two dtrun agents (node ranks 0 and 1) in two network namespaces joined by a
# veth pair rendezvous over that link and train with DDP (2 nodes × 2 workers); the result equals
# one process on the whole batch. Each node's loopback is its own, so collectives only work if
# every worker advertises its address on the link (the one that reaches the store).
source "$2/tests/e2e/lib.sh" "$1" "$2" "to compare weights"
source "$src/tests/e2e/netns_lib.sh"
trap 'netns_teardown; rm -rf "$work"' EXIT
netns_setup

common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=64
  --set model.heads=4 --set model.layers=2 --set model.ff_dim=256 --set model.seq_len=32
  --set data.stride=32 --set train.max_steps=30 --set train.progress=false --set train.eval_max_batches=2
  --set optim.name=sgd --set optim.momentum=0.9 --set train.lr=0.05 --set optim.warmup_steps=0
  --set train.threads=1 --set parallel.timeout_s=60)
"$bin/dtrain" train "${common[@]}" --set train.batch_size=16 --run-dir "$work/single" >"$work/single.out" 2>&1 ||
  { cat "$work/single.out"; fail "single run failed"; }

export DTRAIN_JOB_TOKEN=two-node-test-$$
launch() {  # $1 = namespace, $2 = node rank
  netns_exec "$1" "$bin/dtrun" --nnodes 2 --node-rank "$2" --nproc-per-node 2 --rdzv-endpoint "$NODE_A_IP:29400" \
    --rdzv-id twonodes --rdzv-timeout 60 "$bin/dtrain" train "${common[@]}" --set train.batch_size=4 \
    --run-dir "$work/two" >"$work/node$2.out" 2>&1
}
launch "$NS_A" 0 & a=$!
launch "$NS_B" 1 & b=$!
rc_a=0 rc_b=0
wait "$a" || rc_a=$?
wait "$b" || rc_b=$?
[ "$rc_a" -eq 0 ] && [ "$rc_b" -eq 0 ] || { cat "$work/node0.out" "$work/node1.out"; fail "two-node run failed ($rc_a, $rc_b)"; }
grep -q "rendezvous 'twonodes' complete: 2 node(s), 4 workers, store at $NODE_A_IP:29400" "$work/node0.out" ||
  { cat "$work/node0.out"; fail "node 0 did not report the rendezvous"; }
grep -q "^\[0\]: data parallel: rank 0 of 4 (local 0 of 2, node 0) via dtrun" "$work/node0.out" ||
  { cat "$work/node0.out"; fail "rank 0 did not report 4 ranks"; }
"$py" "$src/tests/python/compare_weights.py" "$work/single/model_final" "$work/two/model_final" 1e-5 \
  "2 nodes × 2 workers vs 1 process" || fail "the two-node run differs from one process"
echo "PASS: two nodes over a veth link"
