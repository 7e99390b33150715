#!/usr/bin/env bash
# What losing a node costs an elastic job, side by side in one run: two "nodes" (network
# namespaces joined by a veth pair, tests/e2e/netns_lib.sh; root needed) × 1 worker train the same
# steps with train.global_batch (a) without a failure and (b) with node B's dtrun killed (kill -9)
# right after the checkpoint of step --kill-at, then started again at once. Prints, from the
# nodes' own output lines (timestamped as they arrive):
#   detection   the kill → node A names the lost node (its heartbeat stood still, or its workers failed)
#   rendezvous  → the new round closes ("membership: 1 node")
#   resumed     → the first step trained after loading the checkpoint
#   taken in    node B started again → "membership: 2 nodes" (after the next checkpoint)
# and the elastic run's wall time against the uninterrupted one's (the ratio), with the steps
# trained twice. The heartbeat settings are dtrun's defaults unless --keep-alive S:N is given.
# usage: bench/elastic.sh [--bin DIR] [--steps N] [--every N] [--kill-at N] [--keep-alive S:N] [--set k=v ...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
bin=$src/build/bin steps=120 every=20 kill_at=40 keep="" sets=()
while [ $# -gt 0 ]; do
  case $1 in
    --bin) bin=$(cd "$2" && pwd); shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --every) every=$2; shift 2 ;;
    --kill-at) kill_at=$2; shift 2 ;;
    --keep-alive) keep=$2; shift 2 ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d /tmp/elastic.XXXXXX)
source "$src/tests/e2e/netns_lib.sh"
trap 'netns_teardown; rm -rf "$work"' EXIT
netns_setup
"$bin/dtrain" data builtin --out "$work/data" >/dev/null
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=256 --set model.heads=4
  --set model.layers=2 --set model.ff_dim=1024 --set model.seq_len=64 --set data.stride=64
  --set train.max_steps="$steps" --set train.checkpoint_every="$every" --set train.progress=false
  --set train.eval_max_batches=2 --set train.sample_every_s=0 --set train.threads=1 --set train.global_batch=8
  --set train.batch_size=4 "${sets[@]}")
conf=()
[ -z "$keep" ] || conf=(--rdzv-conf "keep_alive_interval=${keep%%:*},keep_alive_max_attempt=${keep##*:}")
export DTRAIN_JOB_TOKEN=elastic-bench-$$
now() { echo "$EPOCHREALTIME"; }
stamp() { while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done; }
agent() {  # $1 namespace, $2 run, $3 output name, $4 port
  netns_exec "$1" "$bin/dtrun" --nnodes 1:2 --nproc-per-node 1 --rdzv-endpoint "$NODE_A_IP:$4" --rdzv-id "b$4" \
    --max-restarts 2 "${conf[@]}" "$bin/dtrain" train "${common[@]}" \
    --run-dir "$work/$2" 2>&1 | stamp >"$work/$3.out"
}
first() { grep -m1 -- "$2" "$work/$1.out" | cut -d' ' -f1; }  # the time of the first line matching $2
since() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f s", b - a }'; }

t0=$(now)
agent "$NS_A" plain plain_a 29410 & a=$!
agent "$NS_B" plain plain_b 29410 & b=$!
wait "$a" "$b"
t_plain=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')

t0=$(now)
agent "$NS_A" el el_a 29411 & a=$!
agent "$NS_B" el el_b 29411 & b=$!
ck=$(printf '%s/el/checkpoints/step_%09d' "$work" "$kill_at")
until [ -d "$ck" ]; do sleep 0.02; done
victim=$(pgrep -x dtrun --ns "$(ip netns pids "$NS_B" | head -n 1)" --nslist net || true)
t_kill=$(now)
kill -9 $victim
wait "$b" 2>/dev/null || true
until grep -q "membership: 1 node" "$work/el_a.out"; do sleep 0.05; done
t_back=$(now)
agent "$NS_B" el el_b2 29411 & b2=$!
wait "$a" "$b2"
t_el=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')

t_lost=$(first el_a "was lost\|another node failed\|error: rank")
t_member=$(first el_a "membership: 1 node")
t_resumed=$(first el_a "resumed from")
t_joined=$(first el_a "membership: 2 nodes")
redone=$(grep -o "resumed from [^ ]* (step [0-9]*" "$work/el_a.out" | head -1 | grep -o "[0-9]*$")
echo "elastic job, 2 nodes × 1 worker, $steps steps, checkpoint every $every, node B killed after step $kill_at" \
  "(heartbeat every S s, lost after N: ${keep:-5:3, dtrun default})"
why=$(grep -m1 -- "was lost\|another node failed\|error: rank" "$work/el_a.out" | cut -d' ' -f2- | cut -c1-150)
echo "  detection    $(since "$t_kill" "$t_lost"): $why"
echo "  rendezvous   $(since "$t_lost" "$t_member")"
echo "  resumed      $(since "$t_member" "$t_resumed") (from step $redone)"
echo "  taken in     $(since "$t_back" "$t_joined") after node B started again"
awk -v p="$t_plain" -v e="$t_el" 'BEGIN { printf "uninterrupted %.1f s, elastic %.1f s: %.2fx the time\n", p, e, e / p }'
