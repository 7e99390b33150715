#!/usr/bin/env bash
# `dtrain train --set device=cuda` end to end: 50 steps with dropout on the GPU track the CPU's
# loss curve (f32: every step within 2e-3 relative; bf16: within 3e-2), checkpoints are written
# and resumable, and the summary names the GPU. Skipped (77) without a GPU, the CUDA backend or its
# libraries.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to compare metrics"
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set train.max_steps=50
  --set train.log_every=1 --set train.progress=false --set train.eval_max_batches=4 --set train.batch_size=32)
probe=$("$bin/dtrain" train "${common[@]}" --set device=cuda --set train.max_steps=1 --run-dir "$work/probe" 2>&1) || {
  case $probe in
    *"has no CUDA backend"* | *"no GPU is visible"* | *"needs the CUDA libraries"*)
      echo "SKIP: ${probe#dtrain: error: }"; exit 77 ;;
    *) echo "$probe"; fail "a one-step GPU run failed" ;;
  esac
}
run() {  # $1 = name, then extra --set pairs
  local name=$1; shift
  "$bin/dtrain" train "${common[@]}" "$@" --run-dir "$work/$name" >"$work/$name.out" 2>&1 ||
    { cat "$work/$name.out"; fail "run $name failed"; }
}
run cpu --set device=cpu
run gpu --set device=cuda
run gpu_bf16 --set device=cuda --set train.precision=bf16
grep -q "cuda:0" "$work/gpu.out" || fail "the GPU run does not name its device"
"$py" - "$work" <<'PY'
import json, sys
work = sys.argv[1]
def losses(name):
    return [r["loss"] for r in map(json.loads, open(f"{work}/{name}/metrics.jsonl")) if r["type"] == "train"]
cpu, gpu, bf = losses("cpu"), losses("gpu"), losses("gpu_bf16")
assert len(cpu) == len(gpu) == len(bf) == 50, (len(cpu), len(gpu), len(bf))
worst = max(abs(a - b) / a for a, b in zip(cpu, gpu))
worst_bf = max(abs(a - b) / a for a, b in zip(cpu, bf))
print(f"f32 worst relative step-loss difference {worst:.2e}; bf16 {worst_bf:.2e}; loss {cpu[0]:.3f} -> {cpu[-1]:.3f}")
if cpu[-1] > 0.9 * cpu[0]: sys.exit("FAIL: the CPU run did not learn")
if worst > 2e-3: sys.exit(f"FAIL: GPU f32 left the CPU curve ({worst:.2e})")
if worst_bf > 3e-2: sys.exit(f"FAIL: GPU bf16 left the CPU curve ({worst_bf:.2e})")
s = json.load(open(f"{work}/gpu/summary.json"))
if not s["device"].startswith("cuda:") or s["peak_device_mb"] <= 0: sys.exit(f"FAIL: summary device {s['device']}")
PY
# a GPU checkpoint resumes (on the GPU) and keeps training
"$bin/dtrain" train --resume "$work/gpu" --set train.max_steps=60 >"$work/resume.out" 2>&1 ||
  { cat "$work/resume.out"; fail "resuming the GPU run failed"; }
grep -q "resumed from" "$work/resume.out" || fail "no resume line"
echo "ok"
