#!/usr/bin/env bash
# scripts/gpu-check.sh rehearsed without a GPU, so that the one prepared command cannot rot: its
# here half on a bundle-shaped tarball of this build (the bundle's own build is left out: minutes)
# stages it with the test data and says what to run (and remakes only a stage it made); its dry
# run unpacks it, finds the programs, runs every step (each reports itself skipped: no GPU),
# writes gpu-check.log, gpu-check.json and artifacts.tar.gz and prints the table; a step limit
# turns into timeouts, a spent budget into skips, a bad option into one line.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to read the results"
[ -f "$bin/../lib/libdtrain_cuda.so" ] || { echo "SKIP: this build has no CUDA plugin (no CUDA toolkit)"; exit 77; }
check=$src/scripts/gpu-check.sh
b=$work/pack/dtrain-test-linux-x86_64
mkdir -p "$b/bin" "$b/lib"
for p in dtrain dtrun test_cuda_kernels test_cuda_bf16 test_cuda_model test_nccl bench_train; do cp "$bin/$p" "$b/bin/"; done
cp "$bin/../lib/libdtrain_cuda.so" "$b/lib/"
echo test >"$b/VERSION"
echo "libcudart.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2" >"$b/NODE_LIBS"
tar -C "$work/pack" -cJf "$work/dtrain-test-linux-x86_64.tar.xz" dtrain-test-linux-x86_64

# here: staged, sized, told
bash "$check" --bundle "$work/dtrain-test-linux-x86_64.tar.xz" --stage "$work/stage" >"$work/here.out" 2>&1 ||
  { cat "$work/here.out"; fail "the here half failed"; }
for f in dtrain-test-linux-x86_64.tar.xz data/builtin/vocab.txt data/builtin/train.bin data/images/meta.json; do
  [ -f "$work/stage/$f" ] || fail "the stage lacks $f: $(ls -R "$work/stage" | head)"
done
grep -q 'of the 64 MiB that may travel' "$work/here.out" || fail "no size line: $(cat "$work/here.out")"
grep -q "command:   bash scripts/gpu-check.sh --there --budget 450 --stage $work/stage" "$work/here.out" ||
  fail "no command to run there: $(cat "$work/here.out")"
echo "ok  here: $(grep 'may travel' "$work/here.out")"
# a stage over a folder it did not make is refused, and the folder kept
mkdir -p "$work/mine" && echo keep >"$work/mine/notes.txt"
rc=0; bash "$check" --bundle "$work/dtrain-test-linux-x86_64.tar.xz" --stage "$work/mine" >"$work/refused.out" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "is not a stage this script made" "$work/refused.out" && [ -f "$work/mine/notes.txt" ] ||
  fail "a stage over another folder: exit $rc, $(cat "$work/refused.out")"
bash "$check" --bundle "$work/dtrain-test-linux-x86_64.tar.xz" --stage "$work/stage" >/dev/null 2>&1 ||
  fail "remaking its own stage failed"

# the dry run: every step skipped (no GPU), the three result files, the table last
OUT=$work/out bash "$check" --dry-run --stage "$work/stage" >"$work/dry.out" 2>&1 || { cat "$work/dry.out"; fail "the dry run failed"; }
for f in gpu-check.log gpu-check.json artifacts.tar.gz; do [ -s "$work/out/$f" ] || fail "no $f"; done
tail -n1 "$work/dry.out" | grep -q "^gpu-check: 8 steps in .* s: none failed" || fail "no final line: $(tail -n3 "$work/dry.out")"
"$py" - "$work/out/gpu-check.json" <<'PY' || fail "the dry run's results are not what it should find"
import json, sys
r = json.load(open(sys.argv[1]))
names = [s["step"] for s in r["steps"]]
want = ["unit_kernels", "unit_bf16", "unit_model", "unit_nccl", "e2e_train", "e2e_layouts", "clients", "bench"]
assert names == want, names
for s in r["steps"]:
    assert s["status"] == "skip", s
    assert s["summary"], s
gtest = [s for s in r["steps"] if s["step"].startswith("unit_")]
assert all("SKIPPED" in s["summary"] or "skipped" in s["summary"] for s in gtest), gtest
print("ok  dry run: " + "; ".join(f"{s['step']} {s['status']}" for s in r["steps"]))
PY
tar -tzf "$work/out/artifacts.tar.gz" >"$work/artifacts.list"
grep -q "logs/e2e_train.log" "$work/artifacts.list" || fail "the artifacts lack the step logs"
grep -q "libcudart.so.13: " "$work/out/gpu-check.log" || fail "the log does not say where the CUDA runtime was looked for"

# limits: a step limit of 0.05 s makes the e2e steps time out; a spent budget skips the rest
rc=0
OUT=$work/out2 bash "$check" --dry-run --stage "$work/stage" --step-limit 0.05 --only e2e_train,clients \
  >"$work/limit.out" 2>&1 || rc=$?
[ $rc -eq 1 ] || fail "steps past their limit should fail the check (exit $rc): $(tail -n5 "$work/limit.out")"
grep -Eq '^e2e_train +timeout' "$work/limit.out" || fail "no timeout row: $(tail -n6 "$work/limit.out")"
OUT=$work/out3 bash "$check" --dry-run --stage "$work/stage" --budget 0 >"$work/budget.out" 2>&1 ||
  fail "a spent budget is no failure"
[ "$(grep -c 'no time left in the budget' "$work/budget.out")" -eq 8 ] || fail "every step skipped: $(cat "$work/budget.out")"
echo "ok  a step limit times out, a spent budget skips"
rc=0; bash "$check" --only nothing >"$work/bad.out" 2>&1 || rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$work/bad.out")" -eq 1 ] && grep -q "gpu-check: error: --only: no step 'nothing'" "$work/bad.out" ||
  fail "a bad option: $(cat "$work/bad.out")"
echo PASS
