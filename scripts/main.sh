#!/usr/bin/env bash
# The main job: install, build, make the built-in corpus, train the course's model on it, evaluate,
# and generate a few lines from the best checkpoint.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
[ -f data/builtin/meta.txt ] || build/bin/dtrain data builtin --out data/builtin
rm -rf runs/quickstart  # the demo's own run dir: start it afresh each time
build/bin/dtrain train --config configs/quickstart.toml --run-dir runs/quickstart "$@"
echo "--- sample from runs/quickstart/model_best:"
build/bin/dtrain generate --checkpoint runs/quickstart/model_best --prompt "the licensee may" --tokens 30 --top-k 20
