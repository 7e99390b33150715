#!/usr/bin/env bash
# `dtrain train --set device=cuda` end to end: 50 steps with dropout on the GPU track the CPU's
# loss curve (f32: every step within 2e-3 relative; bf16: within 3e-2), the summary names the GPU,
# and checkpoints cross devices: the GPU's step-50 checkpoint goes on on the CPU and the CPU's on the
# GPU, 10 steps each tracking the same device's own continuation; a batch too big for the GPU gets
# the planner's layout that fits. Skipped (77) without a GPU, the
# CUDA backend or its libraries.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to compare metrics"
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set train.max_steps=50
  --set train.log_every=1 --set train.progress=false --set train.eval_max_batches=4 --set train.batch_size=32
  --set train.checkpoint_every=50)
skip_without_gpu "${common[@]}"
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
# Checkpoints cross devices: each step-50 checkpoint goes on for 10 steps on both devices.
resume_on() {  # $1 = the run whose checkpoint, $2 = device
  "$bin/dtrain" train --resume "$(ck "$work/$1" 50)" --run-dir "$work/$1_on_$2" --set device="$2" \
    --set train.max_steps=60 >"$work/$1_on_$2.out" 2>&1 || { cat "$work/$1_on_$2.out"; fail "$1's checkpoint on $2"; }
  grep -q "resumed from" "$work/$1_on_$2.out" || fail "no resume line ($1 on $2)"
}
resume_on gpu cpu
resume_on gpu cuda
resume_on cpu cuda
resume_on cpu cpu
"$py" - "$work" <<'PY'
import json, sys
work = sys.argv[1]
def losses(name):
    rows = [r for r in map(json.loads, open(f"{work}/{name}/metrics.jsonl")) if r["type"] == "train"]
    return [r["loss"] for r in rows if r["step"] > 50]
for ck in ("gpu", "cpu"):
    a, b = losses(f"{ck}_on_cpu"), losses(f"{ck}_on_cuda")
    assert len(a) == len(b) == 10, (ck, len(a), len(b))
    worst = max(abs(x - y) / x for x, y in zip(a, b))
    print(f"{ck} checkpoint: 10 steps on the CPU and on the GPU within {worst:.2e}")
    if worst > 2e-3: sys.exit(f"FAIL: the {ck} checkpoint goes on differently on the two devices ({worst:.2e})")
PY
# A batch the GPU cannot hold whole but can with every block recomputed (1.42 and 1.07 GiB per 1000
# samples of this model, as `dtrain plan` puts them): the out-of-memory message names that layout.
gib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 2>/dev/null | awk '{print int($1 / 1024)}')
if [ -n "$gib" ]; then
  big=$((gib * 800))
  "$bin/dtrain" train "${common[@]}" --set device=cuda --set train.batch_size=$big --set train.max_steps=1 \
    --run-dir "$work/oom" >"$work/oom.out" 2>&1 && fail "a batch of $big samples fitted the GPU's $gib GiB"
  grep -q "does not fit in cuda:0" "$work/oom.out" || { cat "$work/oom.out"; fail "the out-of-memory message"; }
  grep -q "the planner finds a layout of 1 rank that fits.*--set train.recompute=full" "$work/oom.out" ||
    { cat "$work/oom.out"; fail "the out-of-memory message names no layout that fits the GPU"; }
  echo "out of memory at a batch of $big on $gib GiB: $(grep -o 'the planner finds[^(]*' "$work/oom.out")"
fi
echo "ok"
