#!/usr/bin/env bash
# The data pipeline, side by side in one run (bench/README.md, "Data pipeline"): prepare's MB/s per
# worker for SentencePiece, tiktoken gpt2 and word-level vocab.txt against the reference encoders on one
# core; the loader's tokens/s per rank on a synthetic ≥ 5 GB corpus, page cache cold, warm and mapped,
# against a training step's token rate; prepare's peak RSS against --memory-mib.
# usage: bench/data.sh [--quick] [--keep] [--bin DIR] [--dir DIR (the work folder's parent, default /tmp)]
#   [--parts "prepare memory loader" (which parts run; loader includes the training step)]
#   [--workers "1 2"] [--rounds 2 (dtrain and the reference on one core, alternated)] [--text-mb 64]
#   [--memory-mb 300] [--caps "32 64 256"] [--memory-tokenizer auto|sp|gpt2|word (auto: gpt2, or sp without node)]
#   [--loader-gb 5] [--shard-tokens N] [--seq 1024] [--batch 8] [--ranks "1 2"]
#   [--read-batches 20000 (per rank and case)] [--read-seconds 60 (at most, per rank and case)]
#   [--train-config configs/bench-large.toml] [--train-steps 5] [--sp-vocab 8000] [--npm DIR]
set -euo pipefail
shopt -s inherit_errexit
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
bin=$root/build/bin base=${TMPDIR:-/tmp} quick=0 keep=0 parts="prepare memory loader"
workers="1 2" rounds=2 text_mb=64 memory_mb=300 caps="32 64 256" memory_tokenizer=auto sp_vocab=8000
loader_gb=5 shard_tokens=0 seq=1024 batch=8 ranks="1 2" read_batches=20000 read_seconds=60
train_config=$root/configs/bench-large.toml train_steps=5 npm=$root/build/tokenizer-parity-npm
args=()
for a in "$@"; do
  case $a in
    --quick) quick=1 ;;
    --keep) keep=1 ;;
    *) args+=("$a") ;;
  esac
done
if [ $quick = 1 ]; then  # about 2 minutes: small corpora, one cap, short reads
  rounds=1 text_mb=8 memory_mb=40 caps=32 loader_gb=1 shard_tokens=134217728 read_batches=3000 train_steps=2
fi
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
bench_options "--parts parts --workers workers --rounds rounds --text-mb text_mb --memory-mb memory_mb --caps caps
  --memory-tokenizer memory_tokenizer --loader-gb loader_gb --shard-tokens shard_tokens --seq seq --batch batch
  --ranks ranks --read-batches read_batches --read-seconds read_seconds --train-config train_config
  --train-steps train_steps --sp-vocab sp_vocab --npm npm --dir base" ${args[@]+"${args[@]}"}
bench_work -p "$base" dtrain-databench.XXXXXX
[ $keep = 1 ] && trap 'echo "kept: $work"' EXIT
results=$work/results.jsonl
# shellcheck source=bench/data_lib.sh
source "$here/data_lib.sh"

echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores;" \
  "load average at start: $(cut -d' ' -f1-3 /proc/loadavg); work folder: $work"
make_tokenizers
[[ " $parts " != *" prepare "* ]] || prepare_throughput
[[ " $parts " != *" memory "* ]] || prepare_memory
[[ " $parts " != *" loader "* ]] || { loader_throughput && train_rate; }
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$here/data_report.py" "$results"
