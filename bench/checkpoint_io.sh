#!/usr/bin/env bash
# Checkpoint I/O on a ~100M-parameter model (d 768, 12 layers, 12 heads, ff 3072, seq 128, the
# builtin corpus' vocabulary; AdamW: weights + 2 moments = 12 bytes per parameter), side by side in
# one run with this disk's own sequential speed (dd with fsync): sharded save and load time and
# bytes/s per rank at 1, 2 and 4 ranks (FSDP, every rank writing its shard at once), synchronous
# and asynchronous, the full format at 1 rank, and the training stall each asynchronous save caused
# against a synchronous save. Figures come from the runs' own metrics.jsonl records.
# usage: bench/checkpoint_io.sh [--bin DIR] [--ranks "1 2 4"] [--dir DIR (on the disk to measure)]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/../build/bin ranks="1 2 4" base=${TMPDIR:-/tmp}
source "$here/lib.sh"
bench_options "--ranks ranks --dir base" "$@"
bench_work -p "$base"
bench_data
common=(--config "$here/../configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=768
  --set model.heads=12 --set model.layers=12 --set model.ff_dim=3072 --set model.seq_len=128 --set data.stride=128
  --set train.batch_size=1 "${bench_quiet[@]}"
  --set train.threads=1 --set optim.warmup_steps=0 --set train.keep_checkpoints=1)
run() {  # $1 = name, $2 = ranks, then arguments
  local name=$1 n=$2; shift 2
  OMP_NUM_THREADS=1 "$bin/dtrun" --standalone --nproc-per-node "$n" --no-tag "$bin/dtrain" train "$@" \
    >"$work/$name.out" 2>&1 || { cat "$work/$name.out"; exit 1; }
}
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg); disk: $(df -h "$work" | awk 'NR==2 {print $1}')"
# The disk's own speed: 1 GiB written with fsync, then read back (from the page cache unless it was evicted).
dd if=/dev/zero of="$work/dd" bs=4M count=256 conv=fsync 2>"$work/dd.w"
dd if="$work/dd" of=/dev/null bs=4M 2>"$work/dd.r"
rm -f "$work/dd"
disk_w=$(awk '/copied/ {print $(NF-1), $NF}' "$work/dd.w") disk_r=$(awk '/copied/ {print $(NF-1), $NF}' "$work/dd.r")
echo "dd (1 GiB, fsync): write $disk_w, read $disk_r"
cases=()
for n in $ranks; do
  shard=(--set parallel.dp_shard="$n" --set parallel.dp_replicate=1)
  for mode in sync async; do
    name="r${n}_$mode"
    # 3 steps, a save after each; then a resume of the last one at the same layout (the load)
    run "$name" "$n" "${common[@]}" "${shard[@]}" --set train.max_steps=3 --set train.checkpoint_every=1 \
      --set train.checkpoint_format=sharded --set train.checkpoint_async=$([ $mode = async ] && echo true || echo false) \
      --run-dir "$work/$name"
    run "${name}_load" "$n" --resume "$work/$name" --set train.max_steps=3
    cp "$work/$name/metrics.jsonl" "$work/$name.metrics"
    cases+=("$name")
    rm -rf "$work/$name"
  done
done
run r1_full 1 "${common[@]}" --set train.max_steps=3 --set train.checkpoint_every=1 --set train.checkpoint_format=full \
  --run-dir "$work/r1_full"
run r1_full_load 1 --resume "$work/r1_full" --set train.max_steps=3
cp "$work/r1_full/metrics.jsonl" "$work/r1_full.metrics"
cases+=(r1_full)
python3 - "$work" "$disk_w" "${cases[@]}" <<'PY'
import json, sys
work, disk, cases = sys.argv[1], sys.argv[2], sys.argv[3:]
num, unit = disk.split()
scale = {"kB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9}.get(unit, 1)
disk_bps = float(num) * scale
rows, sync_save = [], {}
for c in cases:
    recs = [json.loads(l) for l in open(f"{work}/{c}.metrics")]
    saves = [r for r in recs if r["type"] == "checkpoint"]
    written = [r for r in recs if r["type"] == "checkpoint_written"]
    load = [r for r in recs if r["type"] == "checkpoint_load"][-1]
    ranks = int(c[1:c.index("_")])
    stall = min(r["stall_seconds"] for r in saves)
    save_s = min(r["write_seconds"] for r in written) if written else stall
    per_rank = saves[0]["bytes"]
    if not written: sync_save[c] = stall
    rows.append((c, ranks, per_rank, save_s, stall, load["seconds"], load["bytes_read"]))
print(f"{'case':<10} {'ranks':>5} {'MB/rank':>8} {'save s':>7} {'MB/s/rank':>9} {'of disk':>7} {'stall s':>8} "
      f"{'stall/sync':>10} {'load s':>7} {'MB/s/rank':>9}")
for c, n, b, s, st, ls, lb in rows:
    ratio = st / sync_save.get(c.replace("_async", "_sync"), st)
    print(f"{c:<10} {n:>5} {b / 1e6:>8.1f} {s:>7.2f} {b / s / 1e6:>9.1f} {b * n / s / disk_bps:>6.0%} {st:>8.3f} "
          f"{ratio:>10.1%} {ls:>7.2f} {lb / ls / 1e6:>9.1f}")
print("stall/sync: the stall against the same layout's synchronous save; save s: the fastest of 3 saves (async: the background write); of disk: all ranks' bytes/s against dd's "
      "write speed; stall: how long the save held training; load s: a resume at the same layout (rank 0)")
PY
