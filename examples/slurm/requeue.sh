# Sourced by the batch scripts: runs their job step so that a job about to reach its time limit (or
# preempted) saves and requeues itself, until the run is done. Needs `#SBATCH --signal=B:USR1@SECONDS`
# (the warning, to this shell), `#SBATCH --requeue` and `--resume auto` on the dtrain line.
#
#   run_requeued srun ... dtrain train ... --resume auto
#
# The step runs in the background; SIGUSR1 and SIGTERM reaching this shell are passed on to it (srun
# hands them to every task; dtrun to its workers), and every rank finishes its step, saves and exits
# with 79. On 79 the job is requeued: SLURM starts this script again, with the same job id (so the
# same RUN_DIR), and `--resume auto` goes on from the checkpoint; a finished run is not started again.
# Returns the step's exit status.

dtrain_requeue_status=79  # kExitSavedForRequeue: every rank saved and stopped before the job's end

run_requeued() {
  "$@" &
  local step=$!
  # shellcheck disable=SC2064
  trap "echo \"\$(date +%T) batch script: SIGUSR1 caught, passed on to the job step\"; kill -USR1 $step 2>/dev/null" USR1
  # shellcheck disable=SC2064
  trap "echo \"\$(date +%T) batch script: SIGTERM caught, passed on to the job step\"; kill -TERM $step 2>/dev/null" TERM
  # a trapped signal ends `wait` early: wait again while the step lives; bash keeps its status
  while kill -0 "$step" 2>/dev/null; do wait "$step" || true; done
  local status=0
  wait "$step" || status=$?
  trap - USR1 TERM
  if [ "$status" -eq "$dtrain_requeue_status" ]; then
    local job=$SLURM_JOB_ID
    [ -z "${SLURM_ARRAY_JOB_ID:-}" ] || job=${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}
    echo "$(date +%T) batch script: the run saved before the job's end; requeueing job $job"
    scontrol requeue "$job" ||
      echo "batch script: scontrol requeue failed: resubmit this script to go on (--resume auto)"
  fi
  return "$status"
}
