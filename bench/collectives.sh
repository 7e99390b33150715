#!/usr/bin/env bash
# Collectives over Gloo and over MPI side by side in one run, 2 ranks on this machine (mpirun): all-reduce,
# all-gather, reduce-scatter and send/recv from 4 KiB to 256 MiB, with time, algorithm and bus bandwidth
# (nccl-tests' factors), the MPI/Gloo ratio and memcpy of the same size (the memory-bandwidth limit).
# NCCL is not measured here: two NCCL ranks need a GPU each, and this benchmark says so when it finds
# fewer. Prints the CPU and the load average before and after (the machine may be shared).
# usage: bench/collectives.sh [--bin DIR] [--ranks N] [--max-mb M] [--min-kb K] [--ops all-reduce,...]
#                             [--mpirun-args "ARGS"] (e.g. "--bind-to none", "--mca coll_tuned_use_dynamic_rules 1 ...")
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/../build/bin ranks=2 args=() mpirun_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --bin) bin=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --max-mb | --min-kb | --ops) args+=("$1" "$2"); shift 2 ;;
    --mpirun-args) read -ra mpirun_args <<<"$2"; shift 2 ;;
    *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
command -v mpirun >/dev/null || { echo "collectives: mpirun is missing: apt install openmpi-bin" >&2; exit 2; }
[ -f "$bin/../lib/libdtrain_mpi.so" ] ||
  { echo "collectives: $bin/../lib has no libdtrain_mpi.so: install libopenmpi-dev and build again" >&2; exit 2; }
gpus=0
command -v nvidia-smi >/dev/null && gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
echo "CPU: $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n1), $(nproc) cores; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# One thread per rank; as root mpirun needs --allow-run-as-root, and more ranks than cores --oversubscribe.
mpirun --allow-run-as-root --oversubscribe -np "$ranks" -x OMP_NUM_THREADS=1 -x MASTER_PORT="$port" \
  "${mpirun_args[@]}" "$bin/bench_collectives" "${args[@]}"
echo
echo "NCCL: not measured ($gpus GPU(s) here; $ranks NCCL ranks need one GPU each)"
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
