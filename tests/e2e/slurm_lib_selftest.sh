#!/usr/bin/env bash
# Self-test of slurm_lib.sh: starts a private 4-CPU SLURM cluster, runs a 4-task batch job whose
# srun step prints each task's rank, checks ranks 0..3 appear exactly once each, and prints which
# SLURM_* variables the batch script sees versus each srun task. Exit 77 when SLURM is missing.
# Usage: tests/e2e/slurm_lib_selftest.sh   (as root; keeps its folder only when it fails)
set -euo pipefail
source "$(dirname "$0")/slurm_lib.sh"
cluster=$(mktemp -d /tmp/slurm-selftest.XXXXXX)
finish() {
  local rc=$?
  slurm_stop "$cluster"
  if [ "$rc" = 0 ]; then rm -rf "$cluster"; else echo "kept for inspection: $cluster" >&2; fi
}
trap finish EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# the job: which SLURM_* variables the batch script sees, then one 4-task srun step (rank 1 shows
# its variables too)
cat >"$cluster/job.sbatch" <<'JOB'
#!/bin/bash
#SBATCH --ntasks=4
#SBATCH --job-name=selftest
show() {
  for v in SLURM_PROCID SLURM_NTASKS SLURM_STEP_ID SLURM_STEP_NUM_TASKS SLURM_LOCALID SLURM_NODEID \
    SLURM_JOB_NODELIST SLURM_STEP_NODELIST; do echo "$1: $v=${!v-<unset>}"; done
}
export -f show
show batch
srun bash -c 'echo rank=$SLURM_PROCID local=$SLURM_LOCALID ntasks=$SLURM_NTASKS nodelist=$SLURM_JOB_NODELIST step_tasks=$SLURM_STEP_NUM_TASKS'
srun bash -c '[ "$SLURM_PROCID" != 1 ] || show "step rank 1"'
JOB

now() { date +%s.%N; }
t0=$(now)
slurm_start "$cluster" 4 || fail "could not start the private SLURM cluster"
t1=$(now)
slurm_run_batch "$cluster" "$cluster/job.sbatch" || { slurm_job_output "$cluster"; fail "the job failed"; }
t2=$(now)
out=$(slurm_job_output "$cluster")
echo "$out"
for r in 0 1 2 3; do
  n=$(grep -c "^rank=$r " <<<"$out" || true)
  [ "$n" = 1 ] || fail "rank=$r appears $n times"
done
[ "$(grep -c '^rank=' <<<"$out")" = 4 ] || fail "expected exactly 4 ranks"
awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN { printf "start %.1f s, job %.1f s\n", b - a, c - b }'
echo "PASS: slurm_lib.sh runs a 4-task job on a private cluster"
