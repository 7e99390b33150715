#!/usr/bin/env bash
# Elastic jobs for real: dtrun agents with --nnodes MIN:MAX in two network namespaces ("nodes"
# joined by a veth pair) train with DDP, one worker per node, on a run dir both see. Node B's agent
# is killed mid-run (its worker dies with it): the job goes on at one node from the newest
# checkpoint with the same global batch (train.global_batch 12: 2 ranks × 3 samples × 2 micro-steps
# become 1 rank × 4 × 3; 12 also splits over the 3 nodes the 2:3 job below may have), B comes back
# and is taken in after the next checkpoint, and the job ends with the losses and weights of an
# uninterrupted 2-rank run, across the end of an epoch whose last step holds one sample (the other
# rank steps with a filler). With --nnodes 2:3 the lost node leaves fewer than MIN: the job stops
# with one line naming it. A node that waits when the job ends is told so and exits 0.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to compare losses"
source "$src/tests/e2e/netns_lib.sh"
trap 'netns_teardown; cleanup' EXIT
netns_setup

steps=40
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=256
  --set model.heads=4 --set model.layers=2 --set model.ff_dim=1024 --set model.seq_len=64 --set data.stride="$(epoch_stride 64 12 $steps)"
  --set train.max_steps=$steps --set train.checkpoint_every=5 --set train.log_every=1 --set train.progress=false
  --set train.eval_max_batches=2 --set train.sample_every_s=0 --set optim.name=sgd --set optim.momentum=0.9
  --set train.lr=0.05 --set optim.warmup_steps=0 --set train.threads=1 --set parallel.timeout_s=30
  --set train.global_batch=12 --set train.batch_size=4 --set optim.schedule=constant --set model.activation=gelu)
run_ranks full 2  # the uninterrupted run at the full size

export DTRAIN_JOB_TOKEN=elastic-test-$$
port=29400
# $1 = namespace, $2 = the run (run dir $work/$2.run), $3 = this agent's name (output in
# $work/$3.out), $4 = --nnodes, then more dtrun options
agent() {
  local ns=$1 run=$2 name=$3 nodes=$4; shift 4
  netns_exec "$ns" "$bin/dtrun" --nnodes "$nodes" --nproc-per-node 1 --rdzv-endpoint "$NODE_A_IP:$port" \
    --rdzv-id "elastic$port" --rdzv-timeout 8 --stop-timeout 1 --monitor-interval 0.05 \
    --rdzv-conf last_call_timeout=3,keep_alive_interval=1,keep_alive_max_attempt=2 "$@" \
    "$bin/dtrain" train "${common[@]}" --run-dir "$work/$run.run" >"$work/$name.out" 2>&1
}
dtrun_in() { pgrep -P "$1" -x dtrun || true; }  # the dtrun a background agent() runs
ckpt() { [ -d "$work/$1.run/checkpoints/step_$(printf %09d "$2")" ]; }
dump() { for f in "$@"; do echo "=== $f"; cat "$work/$f.out"; done; }

# --- 1:2 — lose node B, go on at one node, take B back in --------------------------------------
agent "$NS_A" el el 1:2 --max-restarts 3 & a=$!
agent "$NS_B" el el_b 1:2 --max-restarts 3 & b=$!
pids+=("$a" "$b")
wait_for 60 ckpt el 10 || { dump el el_b; fail "the 2-node run wrote no checkpoint of step 10"; }
victim=$(dtrun_in "$b")
[ -n "$victim" ] || { dump el el_b; fail "node B's dtrun is not running"; }
kill -9 "$victim"
wait "$b" 2>/dev/null || true
wait_for 60 grep -q "^dtrun: membership: 1 node, 1 worker (lost " "$work/el.out" ||
  { dump el el_b; fail "node A did not go on alone"; }
# B comes back: it waits, and joins after the next checkpoint
agent "$NS_B" el el_b2 1:2 --max-restarts 3 & b2=$!
pids+=("$b2")
rc_a=0 rc_b=0
wait "$a" || rc_a=$?
wait "$b2" || rc_b=$?
[ "$rc_a" -eq 0 ] && [ "$rc_b" -eq 0 ] || { dump el el_b el_b2; fail "the elastic run failed ($rc_a, $rc_b)"; }
for f in el el_b2; do
  grep -q "^dtrun: membership: 2 nodes, 2 workers (joined " "$work/$f.out" ||
    { dump el el_b2; fail "$f did not report that node B joined again"; }
done
grep -q "^dtrun: waiting to join: the job runs on 1 node, 1 worker; it takes this node in" "$work/el_b2.out" ||
  { dump el_b2; fail "node B did not say it waits to join"; }
grep -q "stopping after the checkpoint of step [0-9]*: nodes wait to join" "$work/el.out" "$work/el_b2.out" ||
  { dump el el_b2; fail "the workers did not stop at a checkpoint for the new node"; }
grep -q "the trajectory differs" "$work/el.out" "$work/el_b2.out" && { dump el el_b2; fail "a restart changed the global batch"; }
# metrics.jsonl: a membership record for each change, at the step the job went on from
"$py" - "$work/el.run/metrics.jsonl" "$work/full/metrics.jsonl" <<'PY' || { dump el el_b2; fail "membership records"; }
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
full = [json.loads(l) for l in open(sys.argv[2])]
# the epoch lines' train losses (a mean over the epoch's batches) survive the resizes: the first
# epoch's end (its last step short, at every size) and the partial second epoch at the run's end
a, b = [[r["train_loss"] for r in x if r["type"] == "epoch"] for x in (recs, full)]
assert len(a) == len(b) == 2 and all(abs(x - y) <= 1e-5 * abs(y) for x, y in zip(a, b)), (a, b)
m = [r for r in recs if r["type"] == "membership"]
assert [(r["nodes"], r["world"]) for r in m] == [(1, 1), (2, 2)], m
assert m[0]["change"].startswith("lost ") and m[1]["change"].startswith("joined "), m
assert 5 <= m[0]["step"] < m[1]["step"] < 40 and m[1]["step"] % 5 == 0, m
print("membership records:", [(r["step"], r["nodes"], r["world"]) for r in m])
PY
"$py" "$src/tests/python/compare_losses.py" "$work" "$steps" full:el.run:1e-5 ||
  fail "the elastic run's losses differ from the uninterrupted run's"
# Weights: 40 SGD steps of a 3.2M-parameter model, its micro-batches summed in other orders (3 × 2
# per rank, 4 × 3 at one rank). GELU, not ReLU: at ReLU's kink a unit whose input rounds to either
# side flips, and on this data 1 rank against 2 throughout (no resize) then parts by 7e-3 of fc1's
# largest weight at any layout code; with GELU that is 7e-7.
"$py" "$src/tests/python/compare_weights.py" "$work/full/model_final" "$work/el.run/model_final" 1e-4 \
  "elastic 2 → 1 → 2 nodes vs 2 ranks throughout" || fail "the elastic run's weights differ"

# --- 2:3 — a lost node leaves fewer than MIN: one line naming it -------------------------------
port=29401
agent "$NS_A" min min 2:3 --max-restarts 3 & a=$!
agent "$NS_B" min min_b 2:3 --max-restarts 3 & b=$!
pids+=("$a" "$b")
wait_for 60 ckpt min 5 || { dump min min_b; fail "the 2:3 run wrote no checkpoint of step 5"; }
victim=$(dtrun_in "$b")
kill -9 "$victim"
rc=0
wait "$a" || rc=$?
[ "$rc" -ne 0 ] || { dump min; fail "the job went on below MIN"; }
errors=$(grep "fewer than" "$work/min.out" || true)  # its workers' failure before is a line of its own
[ "$(wc -l <<<"$errors")" -eq 1 ] && [[ $errors == "dtrun: error: "* ]] ||
  { dump min; fail "expected one error line naming the nodes, saw: $errors"; }
[[ $errors == *"fewer than the 2 --nnodes 2:3 needs; lost: "*"($NODE_B_IP)"* ]] ||
  { dump min; fail "the error does not name the lost node: $errors"; }
echo "ok  below MIN: $errors" | cut -c1-240
# --- a node that arrives when no checkpoint is left to take it in at: told so when the job ends ------
# (on loopback: node rank 0 hosts the store; the "job" is a worker that says so and sleeps 4 s)
port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
late=(--nnodes 1:2 --nproc-per-node 1 --rdzv-endpoint "127.0.0.1:$port" --rdzv-id late --rdzv-conf last_call_timeout=0)
job=(bash -c 'echo "a node ran"; sleep 4')  # the same command on every node (an elastic job's terms)
"$bin/dtrun" "${late[@]}" --node-rank 0 "${job[@]}" >"$work/late_a.out" 2>&1 & a=$!
pids+=("$a")
sleep 1
"$bin/dtrun" "${late[@]}" --node-rank 1 "${job[@]}" >"$work/late_b.out" 2>&1 ||
  { dump late_a late_b; fail "the late node did not exit 0"; }
wait "$a" || { dump late_a; fail "the job with a late node failed"; }
grep -q "^dtrun: waiting to join: the job runs on 1 node, 1 worker" "$work/late_b.out" &&
  grep -q "^dtrun: the job ended (it finished) before this node could join it" "$work/late_b.out" &&
  ! grep -q "a node ran" "$work/late_b.out" || { dump late_a late_b; fail "the late node's lines"; }

dump el el_b el_b2 min min_b late_a late_b | grep "^dtrun\|^===\|stopping after\|resumed from"  # what each node said
echo "PASS: an elastic job loses a node, goes on, takes it back, and keeps the uninterrupted trajectory"
