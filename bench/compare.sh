#!/usr/bin/env bash
# dtrain vs the PyTorch reference on this CPU in one run (bench/README.md). Build first:
#   scripts/build.sh && bench/compare.sh [--quick] [--presets seed,large] [--precisions f32,bf16] ...
set -euo pipefail
exec /usr/bin/python3 "$(dirname "$0")/compare.py" "$@"
