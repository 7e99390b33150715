# A private SLURM cluster for end-to-end tests (sourced): munged, slurmctld and slurmd on loopback,
# every file in one folder, free ports chosen at run time, one node with NCPUS CPUs (may exceed
# the real cores). Without the programs, says why and exits 77 (skipped).
# Usage: slurm_start DIR NCPUS; slurm_run_batch DIR SCRIPT [sbatch args…]; slurm_stop DIR (trap-safe)
slurm_need() {
  local p
  for p in munged slurmctld slurmd sbatch sinfo scontrol; do
    command -v "$p" >/dev/null || [ -x "/usr/sbin/$p" ] || { echo "SKIP: $p is not installed (slurm-wlm, munge)"; exit 77; }
  done
  export PATH=$PATH:/usr/sbin
}
slurm_free_port() { "${py:-python3}" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

slurm_start() {
  local dir=$1 ncpus=$2 node
  slurm_need
  node=$(hostname -s)
  mkdir -p "$dir"/{etc,state,spool,log,run}
  chmod 700 "$dir"
  dd if=/dev/urandom of="$dir/etc/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/etc/munge.key"
  munged --force --key-file="$dir/etc/munge.key" --socket="$dir/run/munge.socket" \
    --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/run/munge.seed" ||
    { cat "$dir/log/munged.log" 2>/dev/null; return 1; }
  cat >"$dir/etc/slurm.conf" <<CONF
ClusterName=dtraintest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$(slurm_free_port)
SlurmdPort=$(slurm_free_port)
AuthType=auth/munge
AuthInfo=socket=$dir/run/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
NodeName=$node NodeAddr=127.0.0.1 CPUs=$ncpus RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
  export SLURM_CONF=$dir/etc/slurm.conf
  slurmctld -D -i -f "$SLURM_CONF" >>"$dir/log/slurmctld.stdout" 2>&1 &
  echo $! >"$dir/run/slurmctld.child"
  slurmd -D -N "$node" -f "$SLURM_CONF" >>"$dir/log/slurmd.stdout" 2>&1 &
  echo $! >"$dir/run/slurmd.child"
  local i
  for i in $(seq 300); do
    if sinfo -h -o %T 2>/dev/null | grep -qx idle; then return 0; fi
    sleep 0.1
  done
  echo "slurm did not come up; logs:" >&2
  tail -n 20 "$dir"/log/*.log "$dir"/log/*.stdout >&2 2>/dev/null
  return 1
}

# Submits SCRIPT, waits for it, prints nothing; returns the job's exit code. Output: DIR/job-<id>.out
slurm_run_batch() {
  local dir=$1 script=$2; shift 2
  local id state code
  id=$(sbatch --parsable --output="$dir/job-%j.out" "$@" "$script") || return 1
  echo "$id" >"$dir/run/last_job"
  for _ in $(seq 3000); do
    state=$(scontrol show job "$id" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
    case $state in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | PREEMPTED) break ;;
    esac
    sleep 0.2
  done
  code=$(scontrol show job "$id" | grep -o 'ExitCode=[0-9]*' | head -n 1 | cut -d= -f2)
  [ "$state" = COMPLETED ] && [ "${code:-1}" = 0 ]
}
slurm_job_output() { cat "$1/job-$(cat "$1/run/last_job").out"; }

slurm_stop() {
  local dir=$1 f pid
  [ -d "$dir/run" ] || return 0
  scancel --user=root >/dev/null 2>&1 || true
  for f in slurmd.child slurmctld.child munged.pid; do
    pid=$(cat "$dir/run/$f" 2>/dev/null) || continue
    kill "$pid" 2>/dev/null || true
  done
  for _ in $(seq 50); do
    local alive=0
    for f in slurmd.child slurmctld.child munged.pid; do
      pid=$(cat "$dir/run/$f" 2>/dev/null) || continue
      kill -0 "$pid" 2>/dev/null && alive=1
    done
    [ $alive = 0 ] && return 0
    sleep 0.1
  done
  for f in slurmd.child slurmctld.child munged.pid; do
    pid=$(cat "$dir/run/$f" 2>/dev/null) && kill -9 "$pid" 2>/dev/null || true
  done
}
