#!/usr/bin/env bash
# train.device = auto (the default) and the GPUs of a node: the choice is said in one line; on a
# node with GPUs (a stand-in CUDA plugin reporting DTRAIN_STANDIN_GPUS of them) GPUs that no rank
# uses are named in one warning, two ranks on one GPU are refused in one line unless
# train.share_gpus allows it, and device = cpu never opens the plugin.
source "$2/tests/e2e/lib.sh" "$1" "$2" "(not needed, the shared start)"
d=$bin/dtrain
standin=$bin/../lib/libdtrain_standin_cuda.so
[ -f "$standin" ] || fail "the stand-in plugin $standin was not built"
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=32
  --set model.heads=2 --set model.layers=1 --set model.ff_dim=64 --set model.seq_len=16 --set train.batch_size=16
  --set data.stride=16 --set train.threads=1 --set train.progress=false --set train.max_steps=2)

# This machine (no GPU, or a build without CUDA): auto trains on the CPU and says why.
"$d" train "${common[@]}" --run-dir "$work/auto" >"$work/auto.out" 2>&1 || { cat "$work/auto.out"; fail "auto on the CPU"; }
grep -Eq '^device: cpu; auto: (no GPU visible|this dtrain has no CUDA backend|the CUDA backend cannot be loaded)' \
  "$work/auto.out" || fail "no device line: $(head -3 "$work/auto.out")"
echo "ok  auto without a GPU: $(grep '^device:' "$work/auto.out")"

# A node with 4 GPUs and one rank: the three idle ones named once; then the stand-in's device.
rc=0
DTRAIN_CUDA_PLUGIN=$standin DTRAIN_STANDIN_GPUS=4 "$d" train "${common[@]}" --run-dir "$work/one" \
  >"$work/one.out" 2>"$work/one.err" || rc=$?
[ $rc -ne 0 ] || fail "the stand-in's GPU cannot train"
[ "$(grep -c 'dtrain: warning: .*idle' "$work/one.err")" -eq 1 ] || fail "expected one idle warning: $(cat "$work/one.err")"
grep -qF "GPU 1 (0000:01:00.0), GPU 2 (0000:02:00.0) and GPU 3 (0000:03:00.0) are idle: 1 rank uses 1 of the 4 GPUs" \
  "$work/one.err" || fail "the warning should name GPUs 1-3: $(cat "$work/one.err")"
grep -qF "stand-in CUDA plugin: GPU 0 is not real" "$work/one.err" || fail "auto did not choose cuda:0: $(cat "$work/one.err")"
echo "ok  one rank on 4 GPUs: $(grep warning "$work/one.err" | cut -c1-120)…"

# 3 ranks on 2 GPUs: refused in one line naming the ranks that would share; allowed when asked.
rc=0
DTRAIN_CUDA_PLUGIN=$standin DTRAIN_STANDIN_GPUS=2 "$bin/dtrun" --standalone --nproc-per-node 3 "$d" train \
  "${common[@]}" --run-dir "$work/three" >"$work/three.out" 2>&1 || rc=$?
[ $rc -ne 0 ] || fail "3 ranks on 2 GPUs were not refused"
[ "$(grep -c 'dtrain: error: ranks 0 and 2 on .* would share GPU 0 (0000:00:00.0)' "$work/three.out")" -eq 1 ] ||
  fail "expected one refusal line: $(cat "$work/three.out")"
grep -q "train.share_gpus=true" "$work/three.out" || fail "the refusal should say how to allow it"
! grep -q "is not real" "$work/three.out" || fail "a device was made before the refusal"
echo "ok  3 ranks on 2 GPUs refused: $(grep -o 'ranks 0 and 2.*GPU 0 ([^)]*)' "$work/three.out" | head -1)"
rc=0
DTRAIN_CUDA_PLUGIN=$standin DTRAIN_STANDIN_GPUS=2 "$bin/dtrun" --standalone --nproc-per-node 3 "$d" train \
  "${common[@]}" --set train.share_gpus=true --run-dir "$work/shared" >"$work/shared.out" 2>&1 || rc=$?
! grep -q "would share" "$work/shared.out" || fail "train.share_gpus=true still refused: $(cat "$work/shared.out")"
grep -q "is not real" "$work/shared.out" || fail "with sharing allowed the ranks should make their devices"
echo "ok  train.share_gpus=true lets them share"

# 2 ranks on 2 GPUs: neither a warning nor a refusal.
DTRAIN_CUDA_PLUGIN=$standin DTRAIN_STANDIN_GPUS=2 "$bin/dtrun" --standalone --nproc-per-node 2 "$d" train \
  "${common[@]}" --run-dir "$work/two" >"$work/two.out" 2>&1 || true
! grep -Eq "idle|would share" "$work/two.out" || fail "2 ranks on 2 GPUs: $(cat "$work/two.out")"
grep -q "is not real" "$work/two.out" || fail "2 ranks on 2 GPUs should make their devices: $(cat "$work/two.out")"
echo "ok  2 ranks on 2 GPUs: quiet"

# device = cpu on that node: trains, says nothing of GPUs.
DTRAIN_CUDA_PLUGIN=$standin DTRAIN_STANDIN_GPUS=4 "$d" train "${common[@]}" --set device=cpu --run-dir "$work/cpu" \
  >"$work/cpu.out" 2>&1 || { cat "$work/cpu.out"; fail "device=cpu on a GPU node"; }
grep -qx "device: cpu" "$work/cpu.out" || fail "no device line: $(head -3 "$work/cpu.out")"
! grep -q "idle" "$work/cpu.out" || fail "device=cpu warned of idle GPUs"
echo "ok  device=cpu on a GPU node trains on the CPU"
echo PASS
