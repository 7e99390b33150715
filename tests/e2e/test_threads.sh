#!/usr/bin/env bash
# Threads that fit the machine: with no OMP_NUM_THREADS a rank runs the CPUs of its affinity mask
# (taskset), divided by the ranks its launcher says share the node (torchrun-style variables, as a
# bare srun gives), or capped by its cgroup's CPU quota (where this test may make a cgroup); dtrun
# --bind cores pins each worker to its own CPU and says so; OpenMP waits passively unless the
# environment sets a policy; rank 0 prints every rank's threads and CPUs; a bad --bind is named; a
# bf16 run on a CPU without native bf16 says it is slow (and one with it does not).
source "$2/tests/e2e/lib.sh" "$1" "$2" "to read outputs"
unset OMP_NUM_THREADS OMP_WAIT_POLICY GOMP_SPINCOUNT
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=32 --set model.heads=2
  --set model.layers=1 --set model.ff_dim=64 --set model.seq_len=16 --set data.stride=16 --set train.max_steps=2
  --set train.epochs=0 --set train.batch_size=8 --set train.eval_max_batches=1 --set train.progress=false
  --set train.sample_every_s=0)
cpus=$(nproc)
expect() {  # FILE PATTERN WHAT
  grep -qE -- "$2" "$1" || { cat "$1"; fail "$3: no line matching '$2'"; }
}

# One process on one CPU of its mask: one thread, passive waiting (dtrain set the policy itself).
taskset -c 0 "$bin/dtrain" train "${common[@]}" --run-dir "$work/one_cpu" >"$work/one_cpu.out" 2>&1 ||
  { cat "$work/one_cpu.out"; fail "the run on one CPU failed"; }
expect "$work/one_cpu.out" "^threads: 1 \(1 CPU in the affinity mask\); OpenMP passive" "one CPU"
expect "$work/one_cpu.out" "^CPUs: .*: rank 0 on 0$" "one CPU's list"
echo "ok  taskset -c 0: 1 thread, passive waiting"

# A policy the user set is kept (no re-execution), and named.
OMP_WAIT_POLICY=ACTIVE taskset -c 0 "$bin/dtrain" train "${common[@]}" --run-dir "$work/active" >"$work/active.out" 2>&1 ||
  { cat "$work/active.out"; fail "the run with OMP_WAIT_POLICY=ACTIVE failed"; }
expect "$work/active.out" "OpenMP active \(spins between parallel regions: OMP_WAIT_POLICY=ACTIVE\)" "ACTIVE"
echo "ok  OMP_WAIT_POLICY=ACTIVE is kept"

if [ "$cpus" -ge 2 ]; then
  # Two ranks started without dtrun (torchrun's variables, as a bare srun gives SLURM's): each takes
  # half of the shared mask.
  port=$((20000 + RANDOM % 20000))
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      DTRAIN_JOB_TOKEN=threads-$port "$bin/dtrain" train "${common[@]}" --run-dir "$work/bare" >"$work/bare$r.out" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { cat "$work"/bare*.out; fail "a bare rank failed"; }; done
  pids=()
  expect "$work/bare0.out" "^threads: $((cpus / 2)) per rank \($cpus CPUs in the affinity mask, shared by 2 local ranks\)" \
    "two bare ranks"
  echo "ok  two ranks without OMP_NUM_THREADS: $((cpus / 2)) thread(s) each"

  # dtrun --bind cores: each worker on its own CPUs, OMP_NUM_THREADS to match.
  "$bin/dtrun" --standalone --nproc-per-node 2 --bind cores "$bin/dtrain" train "${common[@]}" --run-dir "$work/bind" \
    >"$work/bind.out" 2>&1 || { cat "$work/bind.out"; fail "dtrun --bind cores failed"; }
  half=$((cpus / 2))
  first=$([ "$half" -eq 1 ] && echo 0 || echo "0-$((half - 1))")
  second=$([ "$half" -eq 1 ] && echo "$half" || echo "$half-$((2 * half - 1))")
  expect "$work/bind.out" "^\[0\]: threads: $half per rank \(OMP_NUM_THREADS, set by dtrun --bind cores: CPUs $first\)" "bind"
  expect "$work/bind.out" "^\[0\]: CPUs: .*: rank 0 on $first, rank 1 on $second$" "bind's CPU list"
  echo "ok  dtrun --bind cores: rank 0 on $first, rank 1 on $second"
fi

# A cgroup with a quota of one CPU (root and a writable cgroup v1 cpu or v2 hierarchy only).
cg=""
if [ "$(id -u)" = 0 ] && [ -w /sys/fs/cgroup/cpu ] && [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
  cg=/sys/fs/cgroup/cpu/dtrain-test-$$
  mkdir "$cg" && echo 100000 >"$cg/cpu.cfs_period_us" && echo 100000 >"$cg/cpu.cfs_quota_us"
elif [ "$(id -u)" = 0 ] && [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
  cg=/sys/fs/cgroup/dtrain-test-$$
  mkdir "$cg" && echo "100000 100000" >"$cg/cpu.max"
fi
if [ -n "$cg" ]; then
  rc=0
  sh -c "echo \$\$ >'$cg/cgroup.procs' && exec '$bin/dtrain' train $(printf '%q ' "${common[@]}") --run-dir '$work/quota'" \
    >"$work/quota.out" 2>&1 || rc=$?
  rmdir "$cg" 2>/dev/null || true
  [ $rc -eq 0 ] || { cat "$work/quota.out"; fail "the run in a cgroup failed"; }
  expect "$work/quota.out" "^threads: 1 \(.*; cgroup CPU quota 1\)" "quota"
  echo "ok  a cgroup quota of 1 CPU: 1 thread"
else
  echo "skip the cgroup quota case: needs root and a writable cgroup cpu hierarchy"
fi

rc=0
"$bin/dtrun" --bind bogus "$bin/dtrain" --help >/dev/null 2>"$work/bind.err" || rc=$?
[ $rc -ne 0 ] && [ "$(wc -l <"$work/bind.err")" -eq 1 ] && grep -q "^dtrun: error: --bind bogus: give \`cores\`" "$work/bind.err" ||
  { cat "$work/bind.err"; fail "dtrun --bind bogus: expected one error line naming the choices (exit $rc)"; }
echo "ok  dtrun --bind bogus: $(cat "$work/bind.err")"

# bf16 on this CPU: a warning exactly when it has no native bf16.
"$bin/dtrain" train "${common[@]}" --set train.precision=bf16 --run-dir "$work/bf16" >"$work/bf16.out" 2>&1 ||
  { cat "$work/bf16.out"; fail "the bf16 run failed"; }
if grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo; then
  ! grep -q "no native bf16" "$work/bf16.out" || fail "a CPU with native bf16 was warned about it"
  "$bin/dtrain" plan --pp 2 --microbatches 2 --schedule 1f1b | grep -q "^this CPU has native bf16" || fail "plan: no bf16 line"
  echo "ok  native bf16: no warning"
else
  expect "$work/bf16.out" "^warning: this CPU has no native bf16" "bf16 warning"
  "$bin/dtrain" plan --pp 2 --microbatches 2 --schedule 1f1b | grep -q "^this CPU has no native bf16" ||
    fail "plan: no bf16 warning"
  echo "ok  no native bf16: warned at start and in dtrain plan"
fi
