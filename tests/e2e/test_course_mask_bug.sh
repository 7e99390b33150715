#!/usr/bin/env bash
# The course's bug, reproduced on request: with model.causal=false every position sees the word it
# must predict, so the validation loss collapses far below what the causal model (the default) can
# reach on the same data and budget. The default must be causal.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to read summary.json"
args=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=32
  --set model.heads=2 --set model.layers=1 --set model.ff_dim=64 --set model.seq_len=16
  --set train.batch_size=32 --set data.stride=2 --set train.epochs=3 --set train.threads=1 --set train.lr=0.003
  --set train.progress=false)
"$bin/dtrain" train "${args[@]}" --run-dir "$work/causal" > /dev/null
"$bin/dtrain" train "${args[@]}" --set model.causal=false --run-dir "$work/leaky" > /dev/null
"$py" - "$work" <<'PY' || exit 1
import json, sys
w = sys.argv[1]
causal = json.load(open(f"{w}/causal/summary.json"))["test_loss"]
leaky = json.load(open(f"{w}/leaky/summary.json"))["test_loss"]
default = json.load(open(f"{w}/causal/config.json"))["model"]["causal"]
print(f"test loss: causal {causal:.3f}, unmasked (course bug) {leaky:.3f}; default causal = {default}")
if default is not True:
    sys.exit("FAIL: the default config is not causal")
if not leaky < causal - 1.0:
    sys.exit(f"FAIL: expected the unmasked model to leak (loss at least 1 nat below causal), got {leaky:.3f} vs {causal:.3f}")
PY
