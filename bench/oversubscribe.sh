#!/usr/bin/env bash
# Ranks sharing a machine, side by side in one run (the course's model on the built-in corpus):
#  1. 2 ranks × 2 threads against 2 ranks × 1 thread under dtrun on this machine, with OpenMP's
#     passive waiting (dtrain's default) and with libgomp's default spinning (GOMP_SPINCOUNT=300000,
#     what dtrain ran with before); target ≥ 0.8× with passive waiting;
#  2. one process with the default thread count beside a CPU-bound load (one busy shell loop)
#     against the same process on a quiet machine, passive and spinning; target ≥ 0.4×;
#  3. on a private SLURM cluster of this machine's CPUs (tests/e2e/slurm_lib.sh; root and
#     slurm-wlm needed, else skipped): a bare `srun -n 2 dtrain train` (no OMP_NUM_THREADS, no
#     binding) against examples/slurm/multi_node_srun.sbatch; target within 10%.
# Tokens/s are summary.json's steady_tokens_per_s (after one warm-up step); the best of --rounds,
# the cases alternating. Run it on an otherwise idle machine.
# usage: bench/oversubscribe.sh [--bin DIR] [--steps N] [--rounds N] [--no-slurm] [--set key=value ...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
bin=$src/build/bin steps=60 rounds=2 slurm=1 sets=()
while [ $# -gt 0 ]; do
  case $1 in
    --bin) bin=$(cd "$2" && pwd); shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --no-slurm) slurm=0; shift ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d /tmp/oversub.XXXXXX)
hog=""
cleanup() {
  [ -z "$hog" ] || kill "$hog" 2>/dev/null || true
  [ "$slurm" = 0 ] || [ ! -d "$work/slurm/run" ] || slurm_stop "$work/slurm" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
"$bin/dtrain" data builtin --out "$work/data" >/dev/null
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set train.max_steps="$steps"
  --set train.epochs=0 --set train.eval_max_batches=1 --set train.progress=false --set train.log_every=1000
  --set train.sample_every_s=0 "${sets[@]}")
tps() { /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['steady_tokens_per_s'])" "$1/summary.json"; }
declare -A best
keep() {  # NAME RUN_DIR: the best tokens/s of NAME
  local t; t=$(tps "$2"); rm -rf "$2"
  best[$1]=$(/usr/bin/python3 -c "print(max(float('$t'), float('${best[$1]:-0}')))")
}
# unset what would decide the case for us
unset OMP_NUM_THREADS OMP_WAIT_POLICY GOMP_SPINCOUNT
spin=300000  # libgomp's spin count when no policy is set
two() {  # NAME THREADS [ENV…]: 2 ranks under dtrun
  local name=$1 t=$2; shift 2
  env "$@" OMP_NUM_THREADS="$t" "$bin/dtrun" --standalone --nproc-per-node 2 --no-tag "$bin/dtrain" train "${common[@]}" \
    --run-dir "$work/$name" >/dev/null
  keep "$name" "$work/$name"
}
one() {  # NAME [ENV…]: one process, default threads
  local name=$1; shift
  env "$@" "$bin/dtrain" train "${common[@]}" --run-dir "$work/$name" >/dev/null
  keep "$name" "$work/$name"
}
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs"
for r in $(seq "$rounds"); do
  two 2x1 1
  two 2x2_passive 2
  two 2x2_spin 2 GOMP_SPINCOUNT=$spin
  one quiet
  one quiet_spin GOMP_SPINCOUNT=$spin
  sh -c 'while :; do :; done' & hog=$!
  one loaded
  one loaded_spin GOMP_SPINCOUNT=$spin
  kill "$hog"; wait "$hog" 2>/dev/null || true; hog=""
done
slurm_line="SLURM: skipped (--no-slurm)"
if [ "$slurm" = 1 ]; then
  source "$src/tests/e2e/slurm_lib.sh"
  if ( slurm_need >/dev/null ) && slurm_start "$work/slurm" "$(nproc)" >/dev/null 2>&1; then
    export DTRAIN_BIN=$bin CONFIG=$src/configs/quickstart.toml
    for r in $(seq "$rounds"); do
      RUN_DIR=$work/sbatch EXTRA_ARGS="${common[*]:2}" slurm_run_batch "$work/slurm" \
        "$src/examples/slurm/multi_node_srun.sbatch" --nodes=1 --ntasks-per-node=2 >/dev/null ||
        { slurm_job_output "$work/slurm"; echo "the sbatch job failed" >&2; exit 1; }
      keep sbatch "$work/sbatch"
      srun -n 2 --kill-on-bad-exit=1 "$bin/dtrain" train "${common[@]}" --run-dir "$work/srun" >/dev/null
      keep srun "$work/srun"
    done
    slurm_stop "$work/slurm" >/dev/null 2>&1 || true
    slurm_line=$(/usr/bin/python3 -c "
s, b = float('${best[srun]}'), float('${best[sbatch]}')
print(f'SLURM, 2 tasks: sbatch script {b:8.0f} tok/s, bare srun -n 2 {s:8.0f} tok/s: {s / b:.2f}x (target >= 0.90: {\"PASS\" if s >= 0.9 * b else \"FAIL\"})')")
  else
    slurm_line="SLURM: skipped ($(slurm_need 2>&1 | head -n 1 || true); or the private cluster did not start)"
  fi
fi
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$steps" "$rounds" <<PY
import sys
b = {k: float(v) for k, v in [$(for k in "${!best[@]}"; do printf "('%s', '%s'), " "$k" "${best[$k]}"; done)]}
steps, rounds = sys.argv[1:]
print(f"quickstart model, {steps} steps, best of {rounds} rounds; tokens/s over all ranks")
def line(what, num, den, target=None):
    r = b[num] / b[den]
    verdict = "" if target is None else f"  (target >= {target:.2f}: {'PASS' if r >= target else 'FAIL'})"
    print(f"{what:<52} {b[num]:8.0f} / {b[den]:8.0f} = {r:.2f}x{verdict}")
line("2 ranks x 2 threads / 2 x 1, passive waiting", "2x2_passive", "2x1", 0.8)
line("2 ranks x 2 threads / 2 x 1, spinning (before)", "2x2_spin", "2x1")
line("1 process beside a busy loop / quiet, passive", "loaded", "quiet", 0.4)
line("1 process beside a busy loop / quiet, spinning", "loaded_spin", "quiet_spin")
line("1 process quiet: passive / spinning", "quiet", "quiet_spin")
PY
echo "$slurm_line"
