# A private SLURM cluster for end-to-end tests (sourced): munged, slurmctld and slurmd on loopback,
# every file in one folder, free ports chosen at run time, one node with NCPUS CPUs (may exceed
# the real cores; with TEST_SLURM_GPUS=N also N GPUs, /dev/null look-alikes). Without the programs
# (or without root), says why and exits 77 (skipped).
# Usage: slurm_start DIR NCPUS; slurm_run_batch DIR SCRIPT [sbatch args…] (returns the job's exit
# code, output in DIR/job-<id>.out unless --output is given); slurm_job_output DIR;
# slurm_release_requeued JOBID [FIELD=VALUE…] (a requeued job started now); slurm_stop DIR
# (trap-safe: ends only the daemons it started, by their recorded pids; leaves DIR for reading).

slurm_need() {  # skips the test (exit 77) when the programs or root are missing
  local p
  export PATH=$PATH:/usr/sbin
  for p in munged slurmctld slurmd sbatch srun sinfo scontrol scancel; do
    command -v "$p" >/dev/null || { echo "SKIP: $p is not installed (slurm-wlm, munge)"; exit 77; }
  done
  [ "$(id -u)" = 0 ] || { echo "SKIP: a private SLURM cluster needs root (slurmd)"; exit 77; }
}

slurm_free_port() {  # a loopback TCP port nobody uses now, other than $1
  local port hex
  while :; do
    port=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
    [ "$port" != "${1:-}" ] || continue
    printf -v hex ':%04X ' "$port"
    grep -q "$hex" /proc/net/tcp /proc/net/tcp6 2>/dev/null || { echo "$port"; return; }
  done
}

slurm_clean_env() {  # an outer SLURM job's variables would steer sbatch/srun to the wrong cluster
  local v
  for v in $(compgen -e); do
    case $v in SLURM_* | SBATCH_* | SRUN_* | SALLOC_*) unset "$v" ;; esac
  done
}

slurm_record() { echo "$2 $3" >>"$1/run/pids"; }  # DIR NAME PID

slurm_start_munge() {  # DIR
  local dir=$1 i
  dd if=/dev/urandom of="$dir/etc/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/etc/munge.key"
  munged --foreground --force --key-file="$dir/etc/munge.key" --socket="$dir/run/munge.socket" \
    --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/run/munged.seed" >>"$dir/log/munged.stdout" 2>&1 &
  slurm_record "$dir" munged $!
  for i in $(seq 50); do
    [ -S "$dir/run/munge.socket" ] && return 0
    sleep 0.1
  done
  echo "munged did not start" >&2
  return 1
}

slurm_write_conf() {  # DIR NCPUS NODE
  local dir=$1 ncpus=$2 node=$3 ctld_port
  ctld_port=$(slurm_free_port)
  cat >"$dir/etc/slurm.conf" <<CONF
ClusterName=dtraintest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$(slurm_free_port "$ctld_port")
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
MailProg=/bin/true
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
SlurmctldTimeout=30
MessageTimeout=10
InactiveLimit=0
KillWait=5
MinJobAge=600
NodeName=$node NodeAddr=127.0.0.1 CPUs=$ncpus RealMemory=1000 State=UNKNOWN${TEST_SLURM_GPUS:+ Gres=gpu:$TEST_SLURM_GPUS}
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
  if [ -n "${TEST_SLURM_GPUS:-}" ]; then  # GPUs that are /dev/null look-alikes: requests of them are accepted
    echo "GresTypes=gpu" >>"$dir/etc/slurm.conf"
    mkdir -p "$dir/dev"
    local i
    for i in $(seq 0 $((TEST_SLURM_GPUS - 1))); do mknod "$dir/dev/gpu$i" c 1 3 2>/dev/null || : >"$dir/dev/gpu$i"; done
    echo "NodeName=$node Name=gpu File=$dir/dev/gpu[0-$((TEST_SLURM_GPUS - 1))]" >"$dir/etc/gres.conf"
  fi
  echo "CgroupPlugin=$(slurm_cgroup_plugin)" >"$dir/etc/cgroup.conf"
}

# slurmd always loads a cgroup plugin; autodetect picks cgroup/v2 on v2 hosts, which wants a systemd
# scope (dbus) and moves slurmd's pid. cgroup/v1's init does nothing and no plugin here uses it;
# from 24.05 on "disabled" says so directly.
slurm_cgroup_plugin() {
  local v
  v=$(slurmd -V | awk '{ split($2, a, "."); print a[1] * 100 + a[2] }')
  if [ "${v:-0}" -ge 2405 ]; then echo disabled; else echo cgroup/v1; fi
}

slurm_wait_idle() {  # DIR: up to 30 s for the node to show up idle
  local dir=$1 i
  for i in $(seq 300); do
    sinfo -h -o %T 2>/dev/null | grep -qx idle && return 0
    sleep 0.1
  done
  echo "slurm did not come up; logs:" >&2
  tail -n 20 "$dir"/log/* >&2 2>/dev/null
  return 1
}

slurm_start() {  # DIR NCPUS: starts the cluster, exports SLURM_CONF, waits until the node is idle
  local dir=$1 ncpus=$2 node
  slurm_need
  mkdir -p "$dir" && dir=$(cd "$dir" && pwd)
  if [ ${#dir} -gt 80 ]; then echo "slurm_start: $dir is too long for a unix socket path" >&2; return 1; fi
  node=$(hostname -s)
  mkdir -p "$dir"/{etc,state,spool,log,run}
  chmod 700 "$dir"
  : >"$dir/run/pids"
  slurm_clean_env
  slurm_start_munge "$dir" || return 1
  slurm_write_conf "$dir" "$ncpus" "$node"
  export SLURM_CONF=$dir/etc/slurm.conf
  # The jobs' store ports (bare srun: MASTER_PORT, else 29500 + job id mod 1000; dtrun's scripts: PORT)
  # would be the same in every private cluster, and two tests may run at once: free ones instead.
  MASTER_PORT=${MASTER_PORT:-$(slurm_free_port)}
  PORT=${PORT:-$(slurm_free_port "$MASTER_PORT")}
  export MASTER_PORT PORT
  slurmctld -D -c -f "$SLURM_CONF" >>"$dir/log/slurmctld.stdout" 2>&1 &
  slurm_record "$dir" slurmctld $!
  slurmd -D -N "$node" -f "$SLURM_CONF" >>"$dir/log/slurmd.stdout" 2>&1 &
  slurm_record "$dir" slurmd $!
  slurm_wait_idle "$dir"
}

slurm_job_field() {  # JOBID FIELD: one field of `scontrol show job` (empty if unknown)
  scontrol -o show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1
}

# Submits SCRIPT and waits for it (SLURM_JOB_WAIT_S, default 600 s; then cancels it); returns the
# job's exit code, or 1 if it ended otherwise (cancelled, timed out, killed by a signal). The job id
# goes to DIR/run/last_job; its output to DIR/job-<id>.out unless the caller passes --output.
slurm_run_batch() {
  local dir=$1 script=$2; shift 2
  local id state="" code i
  id=$(sbatch --parsable --output="$dir/job-%j.out" "$@" "$script") || return 1
  id=${id%%;*}
  echo "$id" >"$dir/run/last_job"
  for i in $(seq $((${SLURM_JOB_WAIT_S:-600} * 5))); do
    state=$(slurm_job_field "$id" JobState)
    case $state in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | PREEMPTED | BOOT_FAIL | DEADLINE) break ;;
    esac
    sleep 0.2
  done
  code=$(slurm_job_field "$id" ExitCode)  # "code:signal"
  case $state:$code in
    COMPLETED:* | FAILED:[1-9]*:0) return "${code%%:*}" ;;
  esac
  echo "slurm job $id: state ${state:-unknown}, exit code ${code:-unknown}" >&2
  scancel "$id" 2>/dev/null || true
  return 1
}
slurm_job_output() { cat "$1/job-$(cat "$1/run/last_job").out"; }  # DIR: the last job's output

# slurm_release_requeued JOBID [FIELD=VALUE…]: a requeued job (or array task) that SLURM holds back
# (reason BeginTime, about two minutes) starts now, with the fields given (e.g. TimeLimit=10), once
# it is pending and its last run's step daemons are gone (started before that, its launch can fail),
# and 2 s later: slurmd revokes the job's credentials at the requeue, to the second, and refuses a
# launch whose credential was made in that same second ("Job credential revoked", seen in CI).
# Returns 1 if that does not happen within 60 s.
slurm_release_requeued() {
  local id=$1 i state job; shift
  for i in $(seq 300); do
    read -r state job < <(squeue -h -j "$id" -o "%T %A" 2>/dev/null) || true  # %A: an array task's own job id
    if [ "${state:-}" = PENDING ] && ! pgrep -f "slurmstepd: \[${job:-$id}\." >/dev/null; then
      sleep 2
      scontrol update JobId="$id" StartTime=now "$@" >/dev/null 2>&1 && return 0
    fi
    sleep 0.2
  done
  return 1
}

slurm_pid_of() {  # DIR NAME: the recorded pid, if that process still runs that program (not a zombie)
  local pid
  pid=$(awk -v n="$2" '$1 == n { print $2 }' "$1/run/pids" 2>/dev/null | tail -n 1)
  [ -n "$pid" ] && awk -v n="$2" '/^Name:/ { name = $2 } /^State:/ { state = $2 }
    END { exit !(name == n && state != "Z") }' "/proc/$pid/status" 2>/dev/null && echo "$pid"
  return 0
}

slurm_end() {  # DIR NAME: TERM, then KILL if it still runs after 5 s
  local pid i
  pid=$(slurm_pid_of "$1" "$2")
  [ -n "$pid" ] || return 0
  kill "$pid" 2>/dev/null || true
  for i in $(seq 50); do
    [ -n "$(slurm_pid_of "$1" "$2")" ] || return 0
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
}

slurm_cancel_all() {  # DIR: cancels every job, waits (max 15 s) until their processes are gone
  local i
  local -x SLURM_CONF=$1/etc/slurm.conf
  timeout 10 scancel --user=root >/dev/null 2>&1 || true
  for i in $(seq 150); do
    [ -z "$(timeout 5 squeue -h -o %i 2>/dev/null)" ] && return 0
    sleep 0.1
  done
  return 0
}

slurm_stop() {  # DIR: cancels the jobs, ends slurmd, slurmctld, munged; DIR stays for reading
  local dir=${1:-}
  [ -n "$dir" ] && [ -f "$dir/run/pids" ] || return 0
  if [ -n "$(slurm_pid_of "$dir" slurmctld)" ]; then
    slurm_cancel_all "$dir"
  fi
  slurm_end "$dir" slurmd
  slurm_end "$dir" slurmctld
  slurm_end "$dir" munged
}
