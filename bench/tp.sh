#!/usr/bin/env bash
# Tensor parallelism, side by side in one run: per-rank parameter memory and per-layer activation
# memory at tp 1, 2 and 4 (with and without sequence parallel) beside Megatron's activation formulas;
# the bytes each rank moves per step, measured against what the layout must move; step time of TP 2
# against one process on the same batch, one thread per rank, with the collectives overlapped (the
# default), blocking, in 4 row chunks, and over MPI (target: TP 2 at most 0.6x one process), with
# each run's collective time and the part the step waited for. Per-layer activations are measured as
# the planned arena's growth from L/2 to L layers. On a 2-core machine 4 ranks share 2 cores: their
# times are not comparable and are not printed.
# usage: bench/tp.sh [--bin DIR] [--batch N] [--steps N] [--set key=value ...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/../build/bin batch=4 steps=6 sets=()
source "$here/lib.sh"
bench_options "--batch batch --steps steps --set sets+" "$@"
bench_work
bench_data
L=4 d=512 heads=8 ff=2048 seq=128
common=(--config "$here/../configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=$d
  --set model.heads=$heads --set model.ff_dim=$ff --set model.seq_len=$seq --set data.stride=$seq
  --set train.batch_size="$batch" "${bench_quiet[@]}" --set train.threads=1 --set optim.warmup_steps=0 --set train.checkpoint_every=0
  "${sets[@]}")
run() {  # $1 = name, $2 = tp, $3 = sequence parallel, $4 = layers, $5 = steps, then extra settings
  local name=$1 t=$2 sp=$3 layers=$4 n=$5; shift 5
  local args=("${common[@]}" --set model.layers="$layers" --set train.max_steps="$n" --set parallel.tp="$t"
    --set parallel.dp_replicate=1 --set parallel.tp_sequence="$sp" "$@" --run-dir "$work/$name")
  if [ "$t" -eq 1 ]; then
    "$bin/dtrain" train "${args[@]}" >"$work/$name.out" 2>&1
  elif [[ " $* " == *" parallel.backend=mpi "* ]]; then
    mpirun --allow-run-as-root --oversubscribe -np "$t" -x OMP_NUM_THREADS=1 "$bin/dtrain" train "${args[@]}" \
      >"$work/$name.out" 2>&1
  else
    OMP_NUM_THREADS=1 "$bin/dtrun" --standalone --nproc-per-node "$t" --no-tag "$bin/dtrain" train "${args[@]}" \
      >"$work/$name.out" 2>&1
  fi || { cat "$work/$name.out"; exit 1; }
}
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
names=()
for cfg in "1 false" "2 false" "2 true" "4 false" "4 true"; do
  read -r t sp <<<"$cfg"
  name="tp${t}$([ "$sp" = true ] && echo _sp || true)"
  run "$name" "$t" "$sp" $L "$steps"
  run "${name}_half" "$t" "$sp" $((L / 2)) 1
  names+=("$name")
done
# the same TP 2 layouts with each collective blocking where it is called (parallel.tp_overlap=false),
# with the row-parallel matmuls in 4 chunks, and over MPI when mpirun and the MPI plugin are here
run tp2_blocking 2 false $L "$steps" --set parallel.tp_overlap=false
run tp2_chunks4 2 false $L "$steps" --set parallel.tp_overlap_chunks=4
run tp2_sp_blocking 2 true $L "$steps" --set parallel.tp_overlap=false
timed=(tp1 tp2 tp2_blocking tp2_chunks4 tp2_sp tp2_sp_blocking)
if command -v mpirun >/dev/null && [ -f "$bin/../lib/libdtrain_mpi.so" ]; then
  run tp2_mpi 2 false $L "$steps" --set parallel.backend=mpi
  run tp2_mpi_blocking 2 false $L "$steps" --set parallel.backend=mpi --set parallel.tp_overlap=false
  run tp2_mpi_sp 2 true $L "$steps" --set parallel.backend=mpi
  timed+=(tp2_mpi tp2_mpi_blocking tp2_mpi_sp)
else
  echo "MPI rows skipped: no mpirun or no build/lib/libdtrain_mpi.so"
fi
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$work" "$L" "$d" "$heads" "$ff" "$seq" "$batch" "${timed[*]}" "${names[@]}" <<'PY'
import json, sys
work, L, h, a, ff, s, b = sys.argv[1], *map(int, sys.argv[2:8])
timed = sys.argv[8].split()
names = sys.argv[9:]
MB, R = 1e6, s * b  # rows per step on each rank (one micro-batch)
print(f"model: d {h}, {a} heads, ff {ff}, {L} layers, seq {s}, batch {b} (f32)")
print(f"{'run':<7} {'params MB':>9} {'act MB/layer':>12} {'ours (theory)':>13} {'Megatron×2':>10} "
      f"{'AR MB/step':>10} {'AG MB/step':>10} {'RS MB/step':>10} {'theory AR/AG/RS':>17} {'ms/step':>8}")
ms = {}
for name in names:
    t, sp = int(name[2]), name.endswith("_sp")
    full, half = (json.load(open(f"{work}/{n}/summary.json")) for n in (name, name + "_half"))
    layer = (full["activation_bytes"] - half["activation_bytes"]) / (L - L // 2)
    # what a block keeps (floats): norm outputs and residuals (rows split under sequence parallel),
    # qkv, attention context and probabilities and the feed-forward activation (cut by t), the norms'
    # row statistics (sequence parallel gathers the matmul inputs again in backward, as Megatron does)
    rows = R // t if sp else R
    ours = 4 * (4 * rows * h + 3 * R * h / t + R * h / t + R * a * s / t + R * ff / t + 4 * rows)
    # Megatron (2-byte activations, 1-byte masks): sbh(10 + 24/t + 5as/(ht)) with tp alone, sbh/t(34 + 5as/h)
    # with sequence parallel (before selective recompute); doubled for f32
    mega = 2 * (R * h * (34 + 5 * a * s / h) / t if sp else R * h * (10 + 24 / t + 5 * a * s / (h * t)))
    # what the regions must move per step (payload each rank contributes): 4 per layer (2 forward, 2 backward)
    # plus the embedding's and the head's, each R·h floats; sequence parallel gathers the 2 matmul inputs
    # again in each layer's backward; the loss's row statistics (max, sum, target) are 3R floats
    n_big = 4 * L + 2
    th_ar = 4 * (3 * R + (0 if sp else n_big * R * h)) if t > 1 else 0
    th_ag = 4 * (n_big + 2 * L) * R * h / t if sp else 0
    th_rs = 4 * n_big * R * h if sp else 0
    ar = full.get("tp_allreduce_bytes_per_step", 0)
    ag = full.get("tp_allgather_bytes_per_step", 0)
    rs = full.get("tp_reduce_scatter_bytes_per_step", 0)
    for got, want, what in ((ar, th_ar, "all-reduce"), (ag, th_ag, "all-gather"), (rs, th_rs, "reduce-scatter")):
        if abs(got - want) > 1e-6 * max(want, 1):
            print(f"  note: {name} {what} {got:.0f} B/step, theory {want:.0f}")
    ms[name] = 1000 * full["train_tokens"] / full["steps"] / full["train_tokens_per_s"]
    shown = f"{ms[name]:8.0f}" if t <= 2 else "       -"
    print(f"{name:<7} {full['parameter_bytes'] / MB:9.1f} {layer / MB:12.2f} {ours / MB:13.2f} {mega / MB:10.2f} "
          f"{ar / MB:10.2f} {ag / MB:10.2f} {rs / MB:10.2f} {th_ar / MB:5.1f}/{th_ag / MB:4.1f}/{th_rs / MB:5.1f} {shown}")
print(f"{'run':<16} {'ms/step':>8} {'/ tp1':>6} {'comm ms/step':>12} {'exposed':>8} {'hidden':>7} {'phases: comm':>12}")
for name in timed:
    r = json.load(open(f"{work}/{name}/summary.json"))
    step = 1000 * r["train_tokens"] / r["steps"] / r["train_tokens_per_s"]
    steps = r["steps"]
    busy = 1000 * r.get("tp_comm_busy_seconds", 0) / steps
    exposed = 1000 * r.get("tp_comm_seconds", 0) / steps
    comm_phase = 1000 * r["step_time"]["phases"].get("comm", {}).get("mean_s", 0.0)
    target = "  (target <= 0.60: " + ("PASS)" if step / ms["tp1"] <= 0.6 else "FAIL)") if name in ("tp2", "tp2_mpi") else ""
    print(f"{name:<16} {step:8.0f} {step / ms['tp1']:5.2f}x {busy:12.1f} {exposed:8.1f} "
          f"{100 * r.get('tp_hidden_fraction', 0):6.0f}% {comm_phase:10.1f} ms{target}")
print("tp2: Gloo, overlapped (the default); _blocking: parallel.tp_overlap=false; _chunks4: row-parallel matmuls in")
print("4 chunks; _mpi: parallel.backend=mpi under mpirun. Each step time is the run's mean over all its steps.")
print("comm: the tp collectives' time per step; exposed: what the training thread waited of it (phases: comm, the")
print("phase clock's comm of the steady steps, counts every wait, the optimizer's norm all-reduce included).")
print("params: this rank's parameter bytes; act: the planned activations' growth per layer (dtrain's arena); "
      "AR/AG/RS: bytes this rank contributed to all-reduces, all-gathers and reduce-scatters per training step.")
PY
