#!/usr/bin/env bash
# PyTorch parity: dtrain's initial weights and batches through tests/python/reference_model.py;
# logits, loss and every gradient within 1e-4 relative, 20 AdamW steps within 1e-4 (relative) of
# the loss. Two presets: the course's (post-norm, ReLU, sinusoidal, untied + bias) and a
# pre-norm/GELU/learned-positions/tied one. Batch 8 x 32: ReLU pre-activations within rounding of 0
# can flip a derivative between any two f32 implementations; a small batch keeps that rare.
# Windows do not overlap (stride = seq_len) so that 20 steps see varied text rather than one
# sentence shifted by a token, which makes the trajectory unstable and chaos-dominated.
set -euo pipefail
bin=$1 src=$2
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 has no torch (install python3-torch)"; exit 77
fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
"$bin/dtrain" data builtin --out "$work/data" >/dev/null
"$bin/dtrain" debug dump --config "$src/configs/seed-wikitext.toml" --set data.dir="$work/data" \
  --set train.batch_size=8 --set data.stride=32 --out "$work/seed" --steps 20
/usr/bin/python3 "$src/tests/python/parity.py" "$work/seed"
"$bin/dtrain" debug dump --config "$src/configs/bench-large.toml" --set data.dir="$work/data" \
  --set train.batch_size=4 --set model.seq_len=64 --set data.stride=64 --out "$work/prenorm" --steps 20
/usr/bin/python3 "$src/tests/python/parity.py" "$work/prenorm"
