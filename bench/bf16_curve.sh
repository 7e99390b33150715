#!/usr/bin/env bash
# bf16 against f32 over a training run: the course preset (configs/seed-wikitext.toml) on the
# built-in corpus, the same seed, data order and dropout masks, three times: f32; f32 again with each
# step's batch in two micro-batches (the same samples and masks: only the order of the sums
# differs, a perturbation of rounding size); bf16. bench/bf16_curve.py prints how far the bf16 curve
# lies from the f32 one, beside how far the perturbed f32 curve does: a difference the perturbed
# f32 run shows too is the run's own sensitivity, not bf16's.
# usage: bench/bf16_curve.sh [--bin DIR] [--preset FILE] [--steps 500] [--batch 512] [--window 25]
#                            [--threads 2] [--keep DIR] [--set key=value ...]
# --keep DIR: a new folder (refused if it exists) that gets the runs' metrics.jsonl (f32.jsonl,
# f32_split.jsonl, bf16.jsonl).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/../build/bin preset=$here/../configs/seed-wikitext.toml steps=500 batch=512 window=25 threads=2 keep= sets=()
source "$here/lib.sh"
bench_options "--preset preset --steps steps --batch batch --window window --threads threads --keep keep --set sets+" "$@"
[ $((batch % 2)) -eq 0 ] || { echo "bf16_curve: --batch must be even (the perturbed run splits it in two)" >&2; exit 2; }
[ -z "$keep" ] || [ ! -e "$keep" ] ||
  { echo "bf16_curve: --keep $keep exists; name a new folder (the script replaces nothing it did not make)" >&2; exit 2; }
bench_work
bench_data
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
run() {  # name, settings...
  local name=$1 start
  shift
  start=$(date +%s.%N)
  "$bin/dtrain" train --config "$preset" --set data.dir="$work/data" --set train.epochs=0 \
    --set train.max_steps="$steps" --set train.batch_size="$batch" --set train.threads="$threads" \
    --set train.log_every=1 --set train.eval_every="$steps" --set train.progress=false "$@" "${sets[@]}" \
    --run-dir "$work/$name" >/dev/null
  echo "$name: $(/usr/bin/python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.0f} s')" \
    "$start" "$(date +%s.%N)")"
}
run f32 --set train.precision=f32
run f32_split --set train.precision=f32 --set train.global_batch="$batch" --set train.batch_size=$((batch / 2))
run bf16 --set train.precision=bf16
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -n "$keep" ]; then
  mkdir "$keep"
  for name in f32 f32_split bf16; do cp "$work/$name/metrics.jsonl" "$keep/$name.jsonl"; done
fi
/usr/bin/python3 "$here/bf16_curve.py" "$work/f32/metrics.jsonl" "$work/f32_split/metrics.jsonl" \
  "$work/bf16/metrics.jsonl" --window "$window"
