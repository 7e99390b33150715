#!/usr/bin/env bash
# The CUDA backend is a plugin opened only when a CUDA device is asked for: the programs link no
# CUDA library (one build serves CPU and GPU nodes), training on the CPU never opens the plugin,
# and a plugin whose CUDA library is missing is one line at device=cuda naming that library and
# LD_LIBRARY_PATH.
source "$2/tests/e2e/lib.sh" "$1" "$2" "(not needed, the shared start)"
d=$bin/dtrain
for p in dtrain dtrun test_cuda_kernels test_nccl; do
  [ -x "$bin/$p" ] || continue
  ! ldd "$bin/$p" | grep -Eq 'lib(cuda|cudart|cublas|cublasLt|cudnn|nccl)[.-]' ||
    fail "$p links a CUDA library: $(ldd "$bin/$p" | grep -E 'cuda|cublas|nccl' | tr '\n' ' ')"
done
echo "ok  the programs link no CUDA library"
command -v cc >/dev/null || { echo "SKIP: no C compiler to make a plugin with a missing library"; exit 77; }

# A stand-in plugin that needs a library which is gone (as libcublasLt.so.13 on a node without CUDA).
cd "$work"
echo 'int dtrain_test_gone(void) { return 1; }' >gone.c
cc -shared -fPIC -o libdtrain_gone_cuda.so.13 -Wl,-soname,libdtrain_gone_cuda.so.13 gone.c
echo 'int dtrain_test_gone(void); int dtrain_cuda_backend(void) { return dtrain_test_gone(); }' >plugin.c
cc -shared -fPIC -o libdtrain_cuda.so plugin.c -L. -l:libdtrain_gone_cuda.so.13
rm libdtrain_gone_cuda.so.13
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=32
  --set model.heads=2 --set model.layers=1 --set model.ff_dim=64 --set model.seq_len=16 --set train.batch_size=16
  --set data.stride=16 --set train.threads=1 --set train.progress=false --set train.max_steps=2)
expect_one_error "device=cuda, CUDA library missing" \
  "libdtrain_gone_cuda.so.13: cannot open shared object file" \
  env DTRAIN_CUDA_PLUGIN="$work/libdtrain_cuda.so" "$d" train "${common[@]}" --set device=cuda --run-dir "$work/gpu"
grep -qF "LD_LIBRARY_PATH" "$work/case.err" || fail "the error should say to add the libraries' folder to LD_LIBRARY_PATH"
DTRAIN_CUDA_PLUGIN="$work/libdtrain_cuda.so" "$d" train "${common[@]}" --run-dir "$work/cpu" >"$work/cpu.out" 2>&1 ||
  { cat "$work/cpu.out"; fail "training on the CPU must not open the CUDA plugin"; }
echo "ok  device=cpu trains with a plugin that cannot load; device=cuda names the missing library"
# Without any plugin: one line saying this dtrain has no CUDA backend.
mkdir -p "$work/nobin/bin" && cp "$d" "$work/nobin/bin/dtrain"
expect_one_error "device=cuda without a plugin" "this dtrain has no CUDA backend" \
  "$work/nobin/bin/dtrain" train "${common[@]}" --set device=cuda --run-dir "$work/none"
echo PASS
