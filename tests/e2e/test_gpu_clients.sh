#!/usr/bin/env bash
# A GPU run's files read by the real clients: its exported weights loaded by safetensors'
# own reader (safetensors.torch.load_file) into the PyTorch reference model give dtrain's logits for
# the same batch (1e-5 relative), and TensorBoard's EventAccumulator reads every train-step loss of
# its event file equal to metrics.jsonl's. Skipped (77) without a GPU, or without torch, safetensors
# and tensorboard in the Python ($DTRAIN_PYTHON; the GPU machine's has them, Debian has neither).
source "$2/tests/e2e/lib.sh" "$1" "$2" "for the Python clients"
"$py" -c "import torch, safetensors.torch, tensorboard" 2>/dev/null ||
  { echo "SKIP: $py lacks torch, safetensors or tensorboard (set DTRAIN_PYTHON to one that has them)"; exit 77; }
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set train.progress=false)
skip_without_gpu "${common[@]}"
"$bin/dtrain" train "${common[@]}" --set device=cuda --set train.max_steps=20 --set train.log_every=1 \
  --run-dir "$work/gpu" >"$work/gpu.out" 2>&1 || { cat "$work/gpu.out"; fail "the GPU run failed"; }
"$bin/dtrain" ckpt export "$work/gpu/model_final" --out "$work/exp/model.safetensors" >/dev/null
"$bin/dtrain" debug dump "${common[@]}" --set train.batch_size=4 --set train.init_from="$work/gpu/model_final" \
  --out "$work/dump" --steps 1 >/dev/null
"$py" "$src/tests/python/check_export.py" "$work/exp/model.safetensors" "$work/exp/model.config.json" \
  "$work/dump" 1e-5 --loader safetensors || fail "safetensors.torch.load_file: the reference's logits differ"
"$py" - "$work/gpu" <<'PY' || fail "TensorBoard does not read the run's event file as metrics.jsonl has it"
import json, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
run = sys.argv[1]
acc = EventAccumulator(run, size_guidance={"scalars": 0})
acc.Reload()
tags = acc.Tags()["scalars"]
want = {r["step"]: r["loss"] for r in map(json.loads, open(f"{run}/metrics.jsonl")) if r["type"] == "train"}
got = {e.step: e.value for e in acc.Scalars("Loss/train_step")}
if got.keys() != want.keys(): sys.exit(f"FAIL: steps {sorted(got)} in TensorBoard, {sorted(want)} in metrics.jsonl")
worst = max(abs(got[s] - want[s]) / abs(want[s]) for s in want)
if worst > 1e-6: sys.exit(f"FAIL: TensorBoard's losses differ from metrics.jsonl's by {worst:.2e}")
print(f"ok  TensorBoard's EventAccumulator: {len(tags)} scalar tags, Loss/train_step at {len(got)} steps equal to "
      f"metrics.jsonl's (within {worst:.1e})")
PY
echo PASS
