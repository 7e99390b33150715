# Shared start of the end-to-end scripts (sourced, not a test): arguments, a work dir removed on
# exit (and the processes listed in $pids killed), fail(), expect_one_error(), wait_for(),
# worker_pid(), skip_without_gpu(), the layout-equivalence helpers run_one(), run_ranks(),
# same_weights(), ck() and same_checkpoints(), restart_after_kill(), a python3 for reading outputs
# ($py), and the built-in corpus prepared in $work/data.
# Usage: source "$2/tests/e2e/lib.sh" "$1" "$2" "why python3 is needed"
set -euo pipefail
bin=$1 src=$2
py=${DTRAIN_PYTHON:-/usr/bin/python3}  # DTRAIN_PYTHON: another (scripts/gpu-check.sh: the GPU machine's)
[ -x "$py" ] || py=$(command -v python3 || true)
if [ -z "$py" ]; then echo "SKIP: no python3 ($3)"; exit 77; fi
work=$(mktemp -d)
pids=()  # background processes a test starts: killed (by pid) on exit
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# expect_one_error NAME NEEDLE CMD...: the command exits 2 with exactly one stderr line, which starts
# with `dtrain: error: ` and contains NEEDLE (the line stays in $work/case.err).
expect_one_error() {
  local name=$1 needle=$2; shift 2
  local rc=0
  timeout 600 "$@" >"$work/case.out" 2>"$work/case.err" || rc=$?
  local err
  err=$(cat "$work/case.err")
  [ $rc -eq 2 ] || fail "$name: expected exit 2, saw $rc (stderr: $err)"
  [ "$(wc -l <"$work/case.err")" -eq 1 ] && [ -n "$err" ] || fail "$name: expected exactly one line on stderr, saw: $err"
  [[ $err == "dtrain: error: "* ]] || fail "$name: stderr should start with 'dtrain: error: ', saw: $err"
  grep -qF -- "$needle" "$work/case.err" || fail "$name: the error should mention '$needle', saw: $err"
  echo "ok  $name: $err" | cut -c1-200
}
wait_for() {  # $1 = seconds, then a command that must succeed (polled every 50 ms)
  local t=$1; shift
  for _ in $(seq $((t * 20))); do "$@" && return 0; sleep 0.05; done
  return 1
}
# The pid of the worker with RANK=$2 among dtrun $1's children (empty when there is none).
worker_pid() {
  local p
  for p in $(pgrep -P "$1"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "RANK=$2"; then echo "$p"; return; fi
  done
}
# The built-in corpus, or a copy of one prepared elsewhere (DTRAIN_TEST_DATA: where the machine has
# no /usr/share/common-licenses of Debian's, e.g. the GPU machine of scripts/gpu-check.sh)
if [ -n "${DTRAIN_TEST_DATA:-}" ]; then cp -r "$DTRAIN_TEST_DATA" "$work/data"
else "$bin/dtrain" data builtin --out "$work/data" >/dev/null; fi
# epoch_stride T G STEPS: a data.stride for $work/data's train split (windows of T tokens) whose epoch
# ends within STEPS steps of global batch G (near 3/5 of them, so that steps follow it) with a short
# last batch of as few samples as can be (1, 2, …: at 4 ranks some hold none of it).
epoch_stride() {
  "$py" - "$work/data/meta.txt" "$@" <<'PYEOF'
import sys
kv = dict(l.strip().split("=", 1) for l in open(sys.argv[1]) if "=" in l)
tokens, T, G, steps = int(kv["train_tokens"]), *map(int, sys.argv[2:5])
best = None
for s in range(T, tokens):
    n = (tokens - T - 1) // s + 1
    per = -(-n // G)
    if n % G and per <= steps - 3:
        key = (n % G, abs(per - 3 * steps // 5))
        best = min(best or (key, s), (key, s))
sys.exit("no stride makes such an epoch") if best is None else print(best[1])
PYEOF
}
# Layout equivalence (the caller sets the array `common`): `dtrain train` with common and the extra
# arguments, in one process or as N ranks under dtrun, into the run dir $work/NAME (its output in
# $work/NAME.out); and two runs' model_final compared within a relative tolerance.
run_one() {  # $1 = name, then extra arguments
  local name=$1; shift
  "$bin/dtrain" train "${common[@]}" "$@" --run-dir "$work/$name" >"$work/$name.out" 2>&1 ||
    { cat "$work/$name.out"; fail "run $name failed"; }
}
run_ranks() {  # $1 = name, $2 = ranks, then extra arguments
  local name=$1 n=$2; shift 2
  "$bin/dtrun" --standalone --nproc-per-node "$n" "$bin/dtrain" train "${common[@]}" "$@" \
    --run-dir "$work/$name" >"$work/$name.out" 2>&1 || { cat "$work/$name.out"; fail "run $name failed"; }
}
# Exits 77 (skipped, saying why) when a GPU run cannot start here (no CUDA backend, no GPU visible, no
# CUDA libraries), and fails on any other error of a one-step GPU run. Arguments: the run's.
skip_without_gpu() {
  local probe
  probe=$("$bin/dtrain" train "$@" --set device=cuda --set train.max_steps=1 --set train.progress=false \
    --run-dir "$work/gpu-probe" 2>&1) || {
    case $probe in
      *"has no CUDA backend"* | *"no GPU is visible"* | *"needs the CUDA libraries"*)
        echo "SKIP: ${probe#dtrain: error: }"; exit 77 ;;
      *) echo "$probe"; fail "a one-step GPU run failed" ;;
    esac
  }
}
whole() {  # $1 = a checkpoint folder: itself when it holds model.safetensors, else its export (sharded)
  if [ -f "$1/model.safetensors" ]; then echo "$1"; return; fi
  local out
  out="$work/whole/$(echo "${1#"$work"/}" | tr / _)"  # outside the run dir, which keeps its own files
  mkdir -p "$out" && "$bin/dtrain" ckpt export "$1" --out "$out/model.safetensors" >/dev/null && echo "$out"
}
ck() { printf '%s/checkpoints/step_%09d' "$1" "$2"; }  # $1 = run dir, $2 = step: its checkpoint folder
# $1 = step, $2 = reference run, then runs: each run's checkpoint of that step, exported with its
# optimizer state (to $work/export/RUN.safetensors), is byte-identical to the reference run's.
same_checkpoints() {
  local step=$1 ref=$2 r; shift 2
  for r in "$ref" "$@"; do
    "$bin/dtrain" ckpt export "$(ck "$work/$r" "$step")" --optimizer --out "$work/export/$r.safetensors" >/dev/null ||
      fail "export of $r's checkpoint failed"
    cmp -s "$work/export/$ref.safetensors" "$work/export/$r.safetensors" ||
      fail "$r: weights or optimizer state differ from $ref's checkpoint after the round trip"
  done
}
same_weights() {  # $1 = reference run, $2 = run, $3 = tolerance
  "$py" "$src/tests/python/compare_weights.py" "$(whole "$work/$1/model_final")" "$(whole "$work/$2/model_final")" \
    "$3" "$2 vs $1" || fail "$2 does not reproduce $1's trajectory"
}
# A job run by `dtrun --standalone --max-restarts 1 ARGS…` into the run dir $work/restarted (output in
# $work/restarted.out) loses rank 1 (kill -9) once its step-20 checkpoint exists: it must restart its
# workers, resume from a checkpoint whose step matches $1 (a grep pattern), and end with the weights
# of the uninterrupted run in $work/straight.
restart_after_kill() {  # $1 = pattern of the step resumed from, then dtrun's arguments
  local resumed=$1; shift
  local attempt
  for attempt in 1 2 3; do
    rm -rf "$work/restarted"
    "$bin/dtrun" --standalone --max-restarts 1 "$@" --run-dir "$work/restarted" >"$work/restarted.out" 2>&1 &
    local agent=$!
    pids+=("$agent")
    wait_for 120 test -d "$work/restarted/checkpoints/step_000000020" ||
      { cat "$work/restarted.out"; fail "no checkpoint to resume from"; }
    local victim
    victim=$(worker_pid "$agent" 1)
    [ -n "$victim" ] && kill -9 "$victim"
    local rc=0; wait "$agent" || rc=$?
    [ "$rc" -eq 0 ] || { cat "$work/restarted.out"; fail "the restarted job failed ($rc)"; }
    grep -q "restarting all workers (restart 1 of 1)" "$work/restarted.out" || { cat "$work/restarted.out"; fail "no restart"; }
    grep -q "^\[0\]: resumed from .*step_$resumed" "$work/restarted.out" && break
    # A fast run can pass its next checkpoint between the poll that saw step 20 and the kill: the
    # restart then rightly resumes from that one, and the kill is tried again.
    if [ "$attempt" -lt 3 ] && grep -q "^\[0\]: resumed from .*step_" "$work/restarted.out"; then
      echo "note: the kill landed after a later checkpoint ($(grep -o 'step_[0-9]*' "$work/restarted.out" | tail -1)); again"
      continue
    fi
    cat "$work/restarted.out"; fail "did not resume"
  done
  "$py" "$src/tests/python/compare_weights.py" "$(whole "$work/straight/model_final")" \
    "$(whole "$work/restarted/model_final")" 0 \
    "restarted vs uninterrupted" || fail "the restarted run ended with other weights"
}
