#!/usr/bin/env bash
# The one command that proves or breaks the CUDA path on a lent GPU machine, in two halves.
#   here:   scripts/gpu-check.sh [--bundle FILE] [--budget S]
#           builds the bundle with the CUDA plugin (scripts/bundle.sh), prepares the test data, puts
#           both in .gpu-check/ (ignored by git, carried to the GPU machine), checks that they and the
#           working tree fit what may travel (64 MiB) and prints what to run there.
#   there:  scripts/gpu-check.sh --there [--only STEP,...] [--budget S]
#           unpacks .gpu-check/*.tar.xz, finds the CUDA, cuBLASLt, cuDNN and NCCL libraries of that
#           machine, records the GPU and versions, then runs every check, each under its own timeout,
#           while the budget lasts; writes gpu-check.log, gpu-check.json and artifacts.tar.gz into
#           $OUT and prints a table last.
#   --dry-run: the there half on this machine: every step runs and reports itself skipped where it
#           needs a GPU, so the plumbing (unpacking, finding programs and libraries, timeouts, the
#           result files) is rehearsed (tests/e2e/test_gpu_check.sh runs it).
#   --stage DIR: another folder than .gpu-check; --step-limit S: no step runs longer than S seconds;
#   --bench-runs dtrain,eager,compile,profile: which runs the benchmark makes; --bench-variant
#           ENV=VALUE: dtrain once more with that environment (an experiment, e.g. DTRAIN_CUDA_BF16=convert).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
stage=$repo/.gpu-check
STEPS="env unit_kernels unit_bf16 unit_model unit_nccl unit_variant e2e_train e2e_layouts clients bench"
die() { echo "gpu-check: error: $*" >&2; exit 2; }

usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; }

mode=here bundle="" budget=450 only="" bench_runs="dtrain,eager,compile,profile" step_limit=0 variants=()
value() {  # OPTION REGEX WHAT: the option's value (the next argument), or one line saying what it needs
  [ $# -ge 4 ] && [[ $4 =~ $2 ]] || die "$1 needs $3"
  echo "$4"
}
seconds='^[0-9]+(\.[0-9]+)?$'
while [ $# -gt 0 ]; do
  case "$1" in
    --there) mode=there ;;
    --dry-run) mode=dry ;;
    --bundle) bundle=$(value "$1" . "a file" "${2-}"); shift ;;
    --budget) budget=$(value "$1" '^[0-9]+$' "whole seconds" "${2-}"); shift ;;
    --only) only=$(value "$1" . "steps ($STEPS)" "${2-}"); shift ;;
    --stage) stage=$(value "$1" . "a folder" "${2-}"); stage=$(realpath -m "$stage"); shift ;;
    --step-limit) step_limit=$(value "$1" "$seconds" "seconds" "${2-}"); shift ;;
    --bench-runs) bench_runs=$(value "$1" . "dtrain,eager,compile,profile" "${2-}"); shift ;;
    --bench-variant) v=$(value "$1" = "ENV=VALUE" "${2-}"); variants+=(--variant "$v"); shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
for s in ${only//,/ }; do [[ " $STEPS " == *" $s "* ]] || die "--only: no step '$s' (steps: $STEPS)"; done

# ---------------------------------------------------------------- here: bundle, data, size, what to run
here() {
  if [ -z "$bundle" ]; then
    "$repo/scripts/bundle.sh" --out "$repo/dist" | tail -n 4
    bundle=$(ls -t "$repo"/dist/dtrain-*-linux-x86_64.tar.xz | head -n1)
  fi
  [ -f "$bundle" ] || die "no bundle $bundle"
  tar -xOJf "$bundle" --wildcards '*/lib/libdtrain_cuda.so' >/dev/null 2>&1 ||
    die "$bundle has no CUDA plugin (lib/libdtrain_cuda.so): build it where the CUDA toolkit is"
  # The stage is remade each time, but only a folder this script made (its marker inside) is removed.
  if [ -e "$stage" ] && [ ! -f "$stage/.gpu-check-stage" ] && [ -n "$(ls -A "$stage" 2>/dev/null)" ]; then
    die "$stage is not a stage this script made (no .gpu-check-stage in it): give --stage a new or empty folder"
  fi
  rm -rf "$stage" && mkdir -p "$stage/data" && : >"$stage/.gpu-check-stage"
  cp "$bundle" "$stage/"
  local tmp; tmp=$(mktemp -d); trap 'rm -rf "$tmp"' RETURN
  tar -C "$tmp" -xJf "$bundle"
  local b; b=$(echo "$tmp"/dtrain-*)
  "$b/bin/dtrain" data builtin --out "$stage/data/builtin" >/dev/null
  small_images "$b/bin/dtrain" "$stage/data/images"
  local tree carried total limit=$((64 << 20))
  tree=$(cd "$repo" && git ls-files -z -co --exclude-standard | xargs -0 du -cb 2>/dev/null | tail -n1 | cut -f1)
  carried=$(du -sb "$stage" | cut -f1)
  total=$((tree + carried))
  echo "gpu-check: working tree $((tree >> 10)) KiB + .gpu-check $((carried >> 10)) KiB =" \
    "$((total >> 20)) MiB of the 64 MiB that may travel"
  [ "$total" -le "$limit" ] || die "that is over 64 MiB: make the bundle smaller or carry less"
  local stage_arg=""
  [ "$stage" = "$repo/.gpu-check" ] || stage_arg=" --stage $stage"
  cat <<EOF
gpu-check: ready. On the GPU machine (the device tool's run), from the repository root:
  command:   bash scripts/gpu-check.sh --there --budget $budget${stage_arg}
  carry:     [".gpu-check"]
  timeout_s: $((budget + 40))
It brings back \$OUT/gpu-check.log, gpu-check.json and artifacts.tar.gz; --only STEP,... reruns some of:
  $STEPS
EOF
}

# 2000 training and 500 test images of Debian's Fashion-MNIST (or random ones without it), prepared.
small_images() {
  local dtrain=$1 out=$2 raw; raw=$(mktemp -d)
  python3 - "$raw" <<'PY'
import gzip, os, random, struct, sys
out = sys.argv[1]
src = "/usr/share/datasets/fashion-mnist"
def idx(name):
    for n in (name, name + ".gz"):
        p = os.path.join(src, n)
        if os.path.exists(p):
            return (gzip.open if p.endswith(".gz") else open)(p, "rb").read()
    return None
for split, n in (("train", 2000), ("t10k", 500)):
    imgs, labs = idx(f"{split}-images-idx3-ubyte"), idx(f"{split}-labels-idx1-ubyte")
    if imgs is None or labs is None:
        rnd = random.Random(1)
        pix, lab = bytes(rnd.randrange(256) for _ in range(n * 784)), bytes(rnd.randrange(10) for _ in range(n))
    else:
        pix, lab = imgs[16:16 + n * 784], labs[8:8 + n]
    open(f"{out}/{split}-images-idx3-ubyte", "wb").write(struct.pack(">IIII", 0x803, n, 28, 28) + pix)
    open(f"{out}/{split}-labels-idx1-ubyte", "wb").write(struct.pack(">II", 0x801, n) + lab)
PY
  "$dtrain" data prepare --format idx --input "$raw" --out "$out" --valid-count 200 >/dev/null
  rm -rf "$raw"
}

# ---------------------------------------------------------------- there: the checks
now() { date +%s; }
log() { echo "$*" | tee -a "$OUT/gpu-check.log"; }

# The folders holding each library the CUDA plugin needs from the node, found (not assumed) under
# Python's site-packages (PyTorch's nvidia/*/lib wheels), the CUDA toolkit, then the loader's cache.
find_node_libs() {
  local need
  need=$(cat "$bdir/NODE_LIBS" 2>/dev/null || echo "libcudart.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2")
  local roots=() r lib dir
  while IFS= read -r r; do [ -d "$r" ] && roots+=("$r"); done < <(python3 - <<'PY' 2>/dev/null
import site, sys
for p in site.getsitepackages() + [site.getusersitepackages()] + sys.path:
    print(p)
PY
  )
  for r in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
    [ -d "$r" ] && roots+=("$r")
  done
  libdirs=() missing=()
  for lib in $need; do
    dir=""
    for r in "${roots[@]}"; do
      dir=$(find "$r/" -maxdepth 5 -name "$lib" \( -type f -o -type l \) 2>/dev/null | head -n1 |
            xargs -r dirname || true)
      [ -n "$dir" ] && break
    done
    if [ -z "$dir" ]; then
      dir=$( (ldconfig -p 2>/dev/null || true) | awk -v l="$lib" '$1 == l {print $NF}' | head -n1 |
            xargs -r dirname || true)
    fi
    if [ -n "$dir" ]; then
      log "  $lib: $dir"
      [[ " ${libdirs[*]} " == *" $dir "* ]] || libdirs+=("$dir")
    else
      log "  $lib: not found"; missing+=("$lib")
    fi
  done
}

# The Python's version and its torch's CUDA, cuDNN and NCCL (the libraries the plugin uses), in a line.
python_versions() {
  "${DTRAIN_PYTHON:-python3}" - <<'PY' 2>&1 | tail -n1
import sys
out = ["python " + sys.version.split()[0]]
try:
    import torch
    out.append(f"torch {torch.__version__} cuda {torch.version.cuda} cudnn {torch.backends.cudnn.version()}")
    try:
        v = torch.cuda.nccl.version()
        out.append("nccl " + (".".join(map(str, v)) if isinstance(v, tuple) else str(v)))
    except Exception:  # a CPU build of torch has no NCCL
        pass
except ImportError:
    out.append("no torch")
print(", ".join(out))
PY
}

record_env() {
  log "== machine"
  { nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv 2>&1 ||
      echo "no nvidia-smi"
    echo "cpu: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)";
    echo "python: $(python_versions)"
    echo "bundle: $(cat "$bdir/VERSION")"
    echo "libraries (LD_LIBRARY_PATH=$LD_LIBRARY_PATH):"
    ldd "$bdir/lib/libdtrain_cuda.so" 2>&1 | grep -E 'cuda|cublas|cudnn|nccl|not found' | sed 's/^/  /'
  } 2>&1 | tee -a "$OUT/gpu-check.log"
}

# run_step NAME LIMIT CMD...: one check under its own timeout (and the budget); its output in
# $logs/NAME.log; a line in $steps_tsv: name, status (pass fail skip timeout), seconds, summary.
run_step() {
  local name=$1 limit=$2; shift 2
  local rc=0 status summary t0
  if [ -n "$only" ] && [[ ",$only," != *",$name,"* ]]; then return 0; fi
  local left=$((deadline - $(now)))
  if [ "$left" -lt 20 ]; then
    printf '%s\tskip\t0\tno time left in the budget\n' "$name" >>"$steps_tsv"
    log "== $name: skipped (no time left)"
    return 0
  fi
  [ "$limit" -le "$left" ] || limit=$left
  [ "$step_limit" = 0 ] || limit=$step_limit
  log "== $name (at most ${limit} s): $*"
  t0=$(now)
  timeout -k 10 "$limit" "$@" >"$logs/$name.log" 2>&1 || rc=$?
  local secs=$(($(now) - t0))
  case $rc in
    0) status=pass ;;
    77) status=skip ;;
    124|137) status=timeout ;;
    *) status=fail ;;
  esac
  summary=$(step_summary "$name" "$status" | tr '\t\n' '  ' | cut -c1-400)
  # a gtest program whose GPU tests skipped (no GPU) is a skip, not a pass
  [[ $status == pass && $summary =~ ^gtest:\ [0-9]+\ passed,\ [1-9] ]] && status=skip
  printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$secs" "$summary" >>"$steps_tsv"
  tail -n 40 "$logs/$name.log" >>"$OUT/gpu-check.log"
  log "-- $name: $status in ${secs} s: $summary"
}

# A gtest program's counts from its log, and the names of the first failed tests.
gtest_summary() {
  local f=$1 passed skipped failed names=""
  passed=$(grep -oE '^\[  PASSED  \] [0-9]+' "$f" | grep -oE '[0-9]+$' || echo 0)
  skipped=$(grep -oE '^\[  SKIPPED \] [0-9]+ test' "$f" | grep -oE '[0-9]+' | head -n1 || echo 0)
  failed=$(grep -cE '^\[  FAILED  \] [A-Za-z]' "$f" || true)
  if [ "${failed:-0}" -gt 0 ]; then
    names=": $(grep -m3 -E '^\[  FAILED  \] [A-Za-z]' "$f" | sed 's/\[  FAILED  \] //' | paste -sd' ')"
  fi
  echo "gtest: ${passed:-0} passed, ${skipped:-0} skipped, ${failed:-0} failed$names"
}

# One line saying what a step found: a gtest program's counts, a skip's reason, or the lines a test
# script says its results in (its last line when it has none).
step_summary() {
  local f=$logs/$1.log lines
  case $2 in
    timeout) echo "ran past its limit; last line: $(tail -n1 "$f" | cut -c1-160)" ; return ;;
    skip) grep -m1 -E '^SKIP|SKIPPED \]' "$f" | cut -c1-200 || echo "skipped"; return ;;
  esac
  if grep -q '^\[==========\]' "$f"; then gtest_summary "$f"; return; fi
  lines=$(grep -E '^(FAIL|ok |targets|f32 worst|[a-z]+ checkpoint|note:|gpu_compare|compare:)' "$f" |
          tail -n 3 || true)
  if [ -n "$lines" ]; then echo "$lines" | paste -sd'|'; else tail -n1 "$f"; fi
}

there() {
  local dry=$1 t_start; t_start=$(now)
  deadline=$((t_start + budget))
  OUT=${OUT:-$repo/gpu-check-out}
  mkdir -p "$OUT"
  : >"$OUT/gpu-check.log"
  local work; work=$(mktemp -d)
  logs=$work/logs steps_tsv=$work/steps.tsv
  mkdir -p "$logs" && : >"$steps_tsv"
  local where="on the GPU machine"
  ((dry)) && where="dry run (no GPU steps)"
  log "gpu-check $where, budget ${budget} s, $(date -u +%FT%TZ)"
  local tarball; tarball=$(ls "$stage"/dtrain-*-linux-x86_64.tar.xz 2>/dev/null | head -n1)
  [ -n "$tarball" ] || die "no bundle in $stage: run scripts/gpu-check.sh here first (and carry .gpu-check)"
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$tarball" "$work"
  bdir=$(echo "$work"/dtrain-*)
  [ -x "$bdir/bin/dtrain" ] && [ -f "$bdir/lib/libdtrain_cuda.so" ] ||
    die "the bundle has no bin/dtrain or lib/libdtrain_cuda.so"
  log "== libraries the CUDA plugin needs from this machine"
  find_node_libs
  export LD_LIBRARY_PATH=$(IFS=:; echo "${libdirs[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export DTRAIN_PYTHON DTRAIN_TEST_DATA=$stage/data/builtin DTRAIN_TEST_IMAGES=$stage/data/images
  DTRAIN_PYTHON=$(command -v python3)  # the tests' Python: one with torch where there is one
  for p in "$DTRAIN_PYTHON" /usr/bin/python3; do
    if [ -x "$p" ] && "$p" -c "import torch" 2>/dev/null; then DTRAIN_PYTHON=$p; break; fi
  done
  export OMP_WAIT_POLICY=PASSIVE
  if [ -z "$only" ] || [[ ",$only," == *",env,"* ]]; then record_env; fi
  local gpu=1
  ((dry)) && gpu=0
  ((gpu)) || export CUDA_VISIBLE_DEVICES=""  # the dry run: the plugin sees no GPU even if the machine has one
  run_step unit_kernels 150 "$bdir/bin/test_cuda_kernels" --gtest_color=no
  run_step unit_bf16 60 "$bdir/bin/test_cuda_bf16" --gtest_color=no
  run_step unit_model 120 "$bdir/bin/test_cuda_model" --gtest_color=no
  run_step unit_nccl 60 "$bdir/bin/test_nccl" --gtest_color=no
  local v
  for ((v = 1; v < ${#variants[@]}; v += 2)); do  # the kernels under each benchmark variant too
    run_step unit_variant 120 env "${variants[v]}" "$bdir/bin/test_cuda_kernels" --gtest_color=no
  done
  run_step e2e_train 180 bash "$repo/tests/e2e/test_gpu_train.sh" "$bdir/bin" "$repo"
  run_step e2e_layouts 180 bash "$repo/tests/e2e/test_gpu_layouts.sh" "$bdir/bin" "$repo"
  run_step clients 90 bash "$repo/tests/e2e/test_gpu_clients.sh" "$bdir/bin" "$repo"
  if ((gpu)); then
    run_step bench 400 python3 "$repo/bench/gpu_compare.py" --bin "$bdir/bin" --runs "$bench_runs" \
      ${variants[@]+"${variants[@]}"} --timeout 150 --json "$work/bench.json"
  else
    run_step bench 30 bash -c 'echo "SKIP: dry run: no GPU to benchmark"; exit 77'
  fi
  finish "$work" "$t_start"
}

# gpu-check.json (the steps, the machine, the bench rows), artifacts.tar.gz (every step's log), and
# the table, printed last.
finish() {
  local work=$1 t_start=$2
  cp "$OUT/gpu-check.log" "$logs/gpu-check.log" 2>/dev/null || true
  tar -C "$work" -czf "$OUT/artifacts.tar.gz" logs $( [ -f "$work/bench.json" ] && echo bench.json)
  python3 - "$work/steps.tsv" "$work/bench.json" "$OUT/gpu-check.json" "$(($(now) - t_start))" <<'PY'
import json, os, subprocess, sys
tsv, bench, out, secs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
steps = []
for line in open(tsv):
    name, status, s, summary = (line.rstrip("\n").split("\t") + [""] * 4)[:4]
    steps.append({"step": name, "status": status, "seconds": int(s), "summary": summary})
try:
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=20).stdout.strip()
except (OSError, subprocess.TimeoutExpired):
    gpu = ""
result = {"gpu": gpu, "seconds": secs, "steps": steps,
          "bench": json.load(open(bench)) if os.path.exists(bench) else None,
          "ld_library_path": os.environ.get("LD_LIBRARY_PATH", "")}
json.dump(result, open(out, "w"), indent=1)
print(f"\n{'step':<14}{'status':<9}{'s':>5}  summary")
for s in steps:
    print(f"{s['step']:<14}{s['status']:<9}{s['seconds']:>5}  {s['summary'][:150]}")
if result["bench"]:
    print(f"\n{'preset':<12}{'run':<15}{'tokens/s':>11}{'MFU':>7}{'GPU MiB':>9}{'dtrain/this':>12}")
    for r in result["bench"]["rows"]:
        if r["run"].startswith("dtrain profile"):
            ops = ", ".join(f"{o['op']} {o['ms']:.1f} ms" + (f" ({o['tflops']:.0f} TFLOP/s)" if o["tflops"] else "")
                            for o in [o for o in r.get("ops", []) if "/" not in o["op"]][:5])
            print(f"{r['preset']:<12}{r['run']:<15}  {ops or r.get('error', '')[:100]}")
            continue
        if "error" in r:
            print(f"{r['preset']:<12}{r['run']:<15}  failed: {r['error'].splitlines()[0][:80] if r['error'] else ''}")
        else:
            print(f"{r['preset']:<12}{r['run']:<15}{r['tokens_per_s']:>11.0f}{100 * r['mfu']:>6.1f}%"
                  f"{r.get('peak_device_mb', 0):>9.0f}{r['dtrain_over_this']:>12.2f}")
bad = [s["step"] for s in steps if s["status"] in ("fail", "timeout")]
print(f"\ngpu-check: {len(steps)} steps in {secs} s: " + (f"FAILED: {', '.join(bad)}" if bad else "none failed"))
sys.exit(1 if bad else 0)
PY
}

case $mode in
  here) here ;;
  there) there 0 ;;
  dry) there 1 ;;
esac
