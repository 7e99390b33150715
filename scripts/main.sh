#!/usr/bin/env bash
# The main job: install, build, make the built-in corpus (words, and subwords for the Llama preset), train the course's model on it, evaluate,
# and generate a few lines from the best checkpoint.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
[ -f data/builtin/meta.txt ] || build/bin/dtrain data builtin --out data/builtin
# the same corpus in subword tokens (configs/llama-tiny.toml): a SentencePiece tokenizer trained on it
if [ ! -f data/builtin-sp/train/manifest.json ]; then
  build/bin/dtrain data tokenizer train --input data/builtin/text/train.txt --vocab-size 2000 --out data/builtin-sp.model
  build/bin/dtrain data prepare --tokenizer data/builtin-sp.model --input data/builtin/text --out data/builtin-sp
fi
rm -rf runs/quickstart  # the demo's own run dir: start it afresh each time
build/bin/dtrain train --config configs/quickstart.toml --run-dir runs/quickstart "$@"
echo "--- sample from runs/quickstart/model_best:"
build/bin/dtrain generate --checkpoint runs/quickstart/model_best --prompt "the licensee may" --tokens 30 --top-k 20
