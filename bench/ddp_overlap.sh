#!/usr/bin/env bash
# DDP cost on this machine, side by side in one run: the same per-rank batch trained by 1 rank
# with 1 thread and by 2 ranks (dtrun) with 1 thread each; prints step times, their ratio, the
# allreduce time, how much of it backward hid and how long a rank waited for the slower one
# (DataParallel::gather_figures). Alternates the two, best of --rounds.
# usage: bench/ddp_overlap.sh [--bin DIR] [--preset FILE] [--batch N] [--steps N] [--rounds N]
#                             [--bucket-mb M ...] [--set key=value ...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/../build/bin preset=$here/../configs/bench-large.toml batch=8 steps=40 rounds=2 buckets=() sets=()
source "$here/lib.sh"
bench_options "--preset preset --batch batch --steps steps --rounds rounds --bucket-mb buckets+ --set sets+" "$@"
[ ${#buckets[@]} -gt 0 ] || buckets=(0 25)  # 0: dtrain's automatic size
bench_work
bench_data
common=(--config "$preset" --set data.dir="$work/data" --set train.batch_size="$batch" --set train.threads=1
  --set train.max_steps="$steps" "${bench_quiet[@]}" "${sets[@]}")
field() { /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
# milliseconds per optimizer step of a finished run
step_ms() { /usr/bin/python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print(1000*s['train_tokens']/s['steps']/s['train_tokens_per_s'])" "$1"; }
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-10s %6s %15s %16s %8s %12s %10s %7s %12s  %s\n" bucket_MB rounds "1 rank ms/step" "2 ranks ms/step" ratio \
  "allreduce s" "exposed s" hidden "rank wait s" buckets
for mb in "${buckets[@]}"; do
  best1=1e30 best2=1e30 comm=0 exposed=0 hidden=0 wait=0
  for r in $(seq "$rounds"); do
    "$bin/dtrain" train "${common[@]}" --run-dir "$work/one_${mb}_$r" >/dev/null
    OMP_NUM_THREADS=1 "$bin/dtrun" --standalone --nproc-per-node 2 --no-tag "$bin/dtrain" train "${common[@]}" \
      --set parallel.bucket_mb="$mb" --run-dir "$work/two_${mb}_$r" >"$work/two.out"
    layout=$(sed -n 's/.*; \([0-9]* gradient buckets of up to [0-9.]* MB\).*/\1/p' "$work/two.out" | head -n 1)
    t1=$(step_ms "$work/one_${mb}_$r/summary.json")
    t2=$(step_ms "$work/two_${mb}_$r/summary.json")
    better=$(/usr/bin/python3 -c "print(int($t1 < $best1))"); [ "$better" = 1 ] && best1=$t1
    better=$(/usr/bin/python3 -c "print(int($t2 < $best2))")
    if [ "$better" = 1 ]; then
      best2=$t2
      comm=$(field "$work/two_${mb}_$r/summary.json" ddp_comm_seconds)
      exposed=$(field "$work/two_${mb}_$r/summary.json" ddp_exposed_seconds)
      hidden=$(field "$work/two_${mb}_$r/summary.json" ddp_hidden_fraction)
      wait=$(field "$work/two_${mb}_$r/summary.json" ddp_rank_wait_seconds)
    fi
    rm -rf "$work/one_${mb}_$r" "$work/two_${mb}_$r"
  done
  /usr/bin/python3 - "$mb" "$rounds" "$best1" "$best2" "$comm" "$exposed" "$hidden" "$wait" "$layout" <<'PY'
import sys
mb, rounds, ms1, ms2, comm, exposed, hidden, wait, layout = sys.argv[1:]
ms1, ms2, comm, exposed, hidden, wait = map(float, (ms1, ms2, comm, exposed, hidden, wait))
mb = "0 (auto)" if float(mb) == 0 else mb
print(f"{mb:<10} {rounds:>6} {ms1:15.1f} {ms2:16.1f} {ms2 / ms1:7.2f}x {comm:12.2f} {exposed:10.2f} {100 * hidden:6.0f}% {wait:12.2f}  {layout}")
PY
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "ratio: 2-rank step time / 1-rank step time on the same per-rank batch (1.00x = communication is free)."
echo "hidden: 1 - exposed/allreduce; per step, allreduce and exposed are the least over the ranks (the last rank"
echo "to end backward waits for communication alone), rank wait is what a rank waited for the slower one."
