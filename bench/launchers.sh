#!/usr/bin/env bash
# What the launcher costs, side by side in one run: the same data-parallel job (2 ranks × 1 thread,
# Gloo) started inside one SLURM allocation (a private cluster on this machine, tests/e2e/slurm_lib.sh;
# root, slurm-wlm, munge and openmpi-bin needed) by
#   dtrun   `srun --ntasks=1 dtrun --standalone --nproc-per-node 2 dtrain train …`
#   srun    `srun --ntasks=2 dtrain train …` (every task a rank)
#   mpirun  `mpirun -np 2 dtrain train …` (OpenMPI starts the ranks; collectives still Gloo's)
# rounds times each, in turn (dtrun, srun, mpirun, dtrun, …). For each: the wall time from the launch
# command to the first step's line in metrics.jsonl (polled every 10 ms: process start, rendezvous,
# data, model, first step), the steady step time (median of the steps after the first 10), the whole
# command's wall time; medians over the rounds, and each launcher's ratio to bare srun.
# usage: bench/launchers.sh [--bin DIR] [--steps N] [--rounds N] [--set k=v ...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
bin=$src/build/bin steps=60 rounds=3 sets=()
source "$here/lib.sh"
bench_options "--steps steps --rounds rounds --set sets+" "$@"
bin=$(cd "$bin" && pwd)
command -v mpirun >/dev/null || { echo "bench/launchers.sh needs mpirun (openmpi-bin)" >&2; exit 2; }
bench_work /tmp/launchers.XXXXXX
source "$src/tests/e2e/slurm_lib.sh"
trap 'slurm_stop "$work/slurm" >/dev/null 2>&1; rm -rf "$work"' EXIT
bench_data
slurm_start "$work/slurm" 2 || { echo "could not start the private SLURM cluster" >&2; exit 1; }

# The job: the course preset's shape at d 256 (about 60 ms a step here), a fixed number of steps.
train_args=(train --config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=256
  --set model.heads=4 --set model.layers=2 --set model.ff_dim=1024 --set model.seq_len=64 --set data.stride=64
  --set train.batch_size=8 --set train.max_steps="$steps" "${bench_quiet[@]}" --set train.log_every=1
  --set parallel.backend=gloo "${sets[@]}")
cat >"$work/job.sh" <<EOF
#!/bin/bash
# Runs inside the allocation: each launcher in turn, timed; one line per run in $work/runs.txt.
set -u
export OMP_NUM_THREADS=1 DTRAIN_JOB_TOKEN=bench
launch() {  # \$1 = launcher, \$2 = round
  local run=$work/run-\$1-\$2 t0 t1="" rc=0
  case \$1 in
    dtrun) set -- srun --ntasks=1 --cpus-per-task=2 "$bin/dtrun" --standalone --nproc-per-node 2 "$bin/dtrain" ;;
    srun) set -- srun --ntasks=2 --cpus-per-task=1 "$bin/dtrain" ;;
    mpirun) set -- mpirun --allow-run-as-root --oversubscribe -np 2 -x OMP_NUM_THREADS -x DTRAIN_JOB_TOKEN \
      -x MASTER_PORT=\$((29500 + RANDOM % 1000)) "$bin/dtrain" ;;
  esac
  t0=\$(date +%s.%N)
  "\$@" $(printf '%q ' "${train_args[@]}") --run-dir "\$run" >"\$run.out" 2>&1 &
  local pid=\$!
  while kill -0 \$pid 2>/dev/null; do
    if [ -z "\$t1" ] && grep -q '"type":"train"' "\$run/metrics.jsonl" 2>/dev/null; then t1=\$(date +%s.%N); fi
    sleep 0.01
  done
  wait \$pid || rc=\$?
  echo "\${run##*/run-} \$rc \$t0 \${t1:-0} \$(date +%s.%N)" >>"$work/runs.txt"
}
for r in \$(seq $rounds); do for l in dtrun srun mpirun; do launch \$l \$r; done; done
EOF
echo "launchers: $steps steps × $rounds rounds each, 2 ranks × 1 thread, $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
SLURM_JOB_WAIT_S=3600 slurm_run_batch "$work/slurm" "$work/job.sh" --nodes=1 --ntasks=2 --cpus-per-task=1 ||
  { slurm_job_output "$work/slurm"; echo "the benchmark job failed" >&2; exit 1; }
/usr/bin/python3 - "$work" <<'EOF'
import json, re, statistics, sys
work = sys.argv[1]
rows, placed_all = {}, []
for line in open(f"{work}/runs.txt"):
    name, rc, t0, t1, t2 = line.split()
    launcher = name.rsplit("-", 1)[0]
    if rc != "0" or float(t1) == 0:
        sys.exit(f"{name} failed (exit {rc}): see {work}/run-{name}.out")
    placed = [l for l in open(f"{work}/run-{name}.out") if "data parallel: rank 0 of 2" in l]
    if not placed:
        sys.exit(f"{name} did not run as 2 ranks of one job: see {work}/run-{name}.out")
    steps = [json.loads(l) for l in open(f"{work}/run-{name}/metrics.jsonl")]
    secs = [r["step_seconds"] for r in steps if r.get("type") == "train" and r["step"] > 10]
    placed_all += placed
    rows.setdefault(launcher, []).append((float(t1) - float(t0), statistics.median(secs), float(t2) - float(t0)))
med = {l: [statistics.median(v[i] for v in runs) for i in range(3)] for l, runs in rows.items()}
base = med["srun"]
print(f"{'launcher':<8} {'first step s':>13} {'step ms':>9} {'wall s':>8}   {'vs srun: first step':>20} {'step':>6} {'wall':>6}")
for l in ("dtrun", "srun", "mpirun"):
    f, s, w = med[l]
    print(f"{l:<8} {f:>13.2f} {s * 1e3:>9.1f} {w:>8.2f}   {f / base[0]:>20.2f} {s / base[1]:>6.2f} {w / base[2]:>6.2f}")
print("how the ranks were placed:", ", ".join(sorted({re.search(r"via ([^;,)]+)", p).group(1) for p in placed_all})))
print(f"(medians of {len(rows['srun'])} rounds; each run's numbers in {work}/runs.txt while it lasts)")
EOF
echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
