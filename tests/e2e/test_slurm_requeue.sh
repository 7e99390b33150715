#!/usr/bin/env bash
# A job's life on a private SLURM cluster: the example batch scripts, stopped before their end, save,
# requeue themselves and end on the uninterrupted run's weights, byte for byte:
#  - dtrun under srun (one_node.sbatch, 2 workers): SIGUSR1 to the batch shell mid-run (what
#    `--signal=B:USR1@120` sends before the time limit; `scancel --batch` sends it now);
#  - bare srun (multi_node_srun.sbatch, 2 tasks): `--time=2` with train.stop_before = 1.95 minutes,
#    the end time read from squeue.
# SLURM holds a requeued job for about two minutes; the test starts it at once (StartTime=now) and
# gives it time to finish (TimeLimit=10).
source "$2/tests/e2e/lib.sh" "$1" "$2" "to pick a port"
source "$src/tests/e2e/slurm_lib.sh"
cluster=$work/slurm
trap 'slurm_stop "$cluster"; cleanup' EXIT
slurm_start "$cluster" 4 || fail "could not start the private SLURM cluster"

export DTRAIN_BIN=$bin DTRAIN_SRC=$src CONFIG=$src/configs/quickstart.toml OMP_NUM_THREADS=1
common=(--set data.dir="$work/data" --set model.dim=64 --set model.heads=4 --set model.layers=1
  --set model.ff_dim=128 --set model.seq_len=32 --set data.stride=32 --set train.epochs=20 --set train.max_steps=600
  --set train.batch_size=4 --set train.progress=false --set train.eval_max_batches=2 --set train.log_every=1
  --set parallel.timeout_s=60)
export EXTRA_ARGS="${common[*]}"
logged() { [ "$(grep -c '"type": *"train"' "$1/metrics.jsonl" 2>/dev/null)" -ge "$2" ] 2>/dev/null; }
submit() {  # $1 = name, $2 = script, then sbatch options: the job id
  local name=$1 script=$2; shift 2
  RUN_DIR=$work/$name sbatch --parsable --output="$cluster/$name.out" "$@" "$src/examples/slurm/$script" | cut -d';' -f1
}
# Waits for job $1 to be requeued (Restarts 1, pending), starts it now with time to finish, then
# waits for it to end; fails unless it completed.
requeue_and_finish() {
  local id=$1 name=$2 i state
  for i in $(seq 600); do
    [ "$(slurm_job_field "$id" Restarts)" = 1 ] && [ "$(slurm_job_field "$id" JobState)" = PENDING ] && break
    state=$(slurm_job_field "$id" JobState)
    case $state in COMPLETED | FAILED | CANCELLED | TIMEOUT) cat "$cluster/$name.out"; fail "$name ended ($state) without a requeue" ;; esac
    sleep 0.2
  done
  slurm_release_requeued "$id" TimeLimit=10 || { scontrol show job "$id"; fail "could not release the requeued job $name"; }
  for i in $(seq 1500); do
    state=$(slurm_job_field "$id" JobState)
    case $state in COMPLETED | FAILED | CANCELLED | TIMEOUT) break ;; esac
    sleep 0.2
  done
  [ "$state" = COMPLETED ] || {
    cat "$cluster/$name.out"; scontrol show job "$id"; tail -n 20 "$cluster"/log/slurm*.log
    fail "$name's requeued run ended $state"
  }
}

dtrun_job=$(submit dtrun one_node.sbatch --time=5 --export=ALL,NPROC=2) || fail "sbatch failed"
# bare srun's store port is 29500 + job id mod 1000 by default: the same in every private cluster
srun_job=$(MASTER_PORT=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') EXTRA_ARGS="$EXTRA_ARGS --set train.stop_before=1.95" submit srun multi_node_srun.sbatch --nodes=1 \
  --ntasks-per-node=2 --time=2) || fail "sbatch failed"
wait_for 120 logged "$work/dtrun" 30 || { cat "$cluster/dtrun.out"; fail "the dtrun job did not get going"; }
scancel --batch --signal=USR1 "$dtrun_job" || fail "scancel --signal=USR1 failed"
requeue_and_finish "$dtrun_job" dtrun
requeue_and_finish "$srun_job" srun

# The uninterrupted run, the same layout (2 data-parallel ranks of 1 thread).
run_ranks straight 2 --config "$CONFIG" "${common[@]}"
expect() {  # $1 = name, $2 = pattern
  grep -q -- "$2" "$cluster/$1.out" || { cat "$cluster/$1.out"; fail "$1: output lacks '$2'"; }
}
expect dtrun "batch script: SIGUSR1 caught, passed on to the job step"
expect dtrun "stopping: SIGUSR1 (the warning before the job's time limit); saved the checkpoint of step"
expect dtrun "batch script: the run saved before the job's end; requeueing job $dtrun_job"
expect dtrun "resumed from $work/dtrun/checkpoints/step_"
expect srun "train.stop_before = 1.95: the job ends at"
expect srun "^stopping.*train.stop_before: 1.95 min before the job's end"
expect srun "requeueing job $srun_job"
for name in dtrun srun; do
  expect "$name" "Test loss"
  cmp -s "$work/straight/model_final/model.safetensors" "$work/$name/model_final/model.safetensors" ||
    fail "$name: the requeued job ended on other weights than the uninterrupted run"
done
echo "PASS: jobs stopped before their end saved, requeued themselves and ended on the uninterrupted weights"
