#!/usr/bin/env bash
# dtrain vs PyTorch (eager, torch.compile) on the GPU of this machine (bench/README.md). Builds
# bench_train with CUDA into build-gpu/ unless --bin points at a built one, then compares.
#   bench/gpu_compare.sh [--bin DIR] [--presets course,gpt2-small] [--steps N] [--python PY]
set -euo pipefail
cd "$(dirname "$0")/.."
args=("$@")
if [[ " $* " != *" --bin "* ]]; then
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DDTRAIN_CUDA=ON -DDTRAIN_TESTS=OFF >/dev/null
  cmake --build build-gpu -j"$(nproc)" --target bench_train >/dev/null
  args+=(--bin build-gpu/bin)
fi
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader || true
exec python3 bench/gpu_compare.py "${args[@]}"
