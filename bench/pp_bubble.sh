#!/usr/bin/env bash
# Pipeline bubbles, side by side in one run: for each schedule, the idle share each rank measured
# from its own action timeline (1 − compute time / pass time, over the run's passes) beside the
# simulated bubble of the same list (F 1, B 2, I 1, W 1) and the textbook one, with the activation
# slots per rank and rank 0's planned activation memory; and one process's step time on the same
# batch. pp 2 by default (one thread per rank on this 2-core machine); --pp 4 where there are 4+
# cores. --timeline DIR keeps each schedule's Chrome trace (trace.json, for Perfetto).
# usage: bench/pp_bubble.sh [--bin DIR] [--pp P] [--micro M] [--steps N] [--timeline DIR] [--set key=value ...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/../build/bin pp=2 micro=8 steps=8 keep="" sets=()
while [ $# -gt 0 ]; do
  case $1 in
    --bin) bin=$2; shift 2 ;;
    --pp) pp=$2; shift 2 ;;
    --micro) micro=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --timeline) keep=$2; shift 2 ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
py=/usr/bin/python3; [ -x "$py" ] || py=python3
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
"$bin/dtrain" data builtin --out "$work/data" >/dev/null
common=(--config "$here/../configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=256
  --set model.heads=4 --set model.ff_dim=1024 --set model.layers=8 --set model.seq_len=64 --set data.stride=64
  --set train.batch_size=$((2 * micro)) --set train.epochs=0 --set train.max_steps="$steps"
  --set train.eval_max_batches=1 --set train.progress=false --set train.log_every=1000 --set train.threads=1
  --set optim.warmup_steps=0 --set train.checkpoint_every=0 "${sets[@]}")
"$bin/dtrain" train "${common[@]}" --run-dir "$work/one" >"$work/one.out" 2>&1 || { cat "$work/one.out"; exit 1; }
printf '%-18s %9s %9s %9s   %-22s %s\n' schedule measured simulated textbook "slots per rank" "activations rank 0"
for s in gpipe 1f1b interleaved-1f1b zb-h1 zb-v; do
  v=1; case $s in interleaved-1f1b|zb-v) v=2;; esac
  "$bin/dtrun" --standalone --nproc-per-node "$pp" "$bin/dtrain" train "${common[@]}" --set parallel.pp="$pp" \
    --set parallel.dp_replicate=1 --set parallel.pp_schedule=$s --set parallel.pp_virtual=$v \
    --set parallel.microbatches="$micro" --set train.trace=true --run-dir "$work/$s" >"$work/$s.out" 2>&1 ||
    { cat "$work/$s.out"; exit 1; }
  "$bin/dtrain" plan --pp "$pp" --virtual $v --microbatches "$micro" --schedule $s >"$work/$s.plan"
  [ -z "$keep" ] || { mkdir -p "$keep"; cp "$work/$s/trace.json" "$keep/$s.json"; }
  "$py" - "$work" "$s" "$pp" <<'PYEOF'
import json, re, sys
work, s, pp = sys.argv[1], sys.argv[2], int(sys.argv[3])
t = json.load(open(f"{work}/{s}/trace.json"))["traceEvents"]
busy, first, last = {}, {}, {}
for e in t:
    if e.get("ph") != "X" or not re.fullmatch(r"\d+[FBIW]\d+", e["name"]): continue  # pipeline actions
    r = e["pid"]; busy[r] = busy.get(r, 0) + e["dur"]
# each rank's idle share over the whole run's passes, from its own timeline (the engine's own
# figure for rank 0 is in summary.json; the spans below include the optimizer step between passes,
# so we use the engine's pass time for rank 0 and report every rank from the trace's pass windows)
summ = json.load(open(f"{work}/{s}/summary.json"))
plan = open(f"{work}/{s}.plan").read()
textbook = re.search(r"bubble \(textbook[^)]*\): ([0-9.]+)", plan)
slots = re.search(r"activation slots per stage: (.*)", plan).group(1).replace("rank ", "r")
print(f"{s:<18} {100*summ['pp_idle_share']:8.1f}% {100*summ['pp_simulated_bubble']:8.1f}% "
      f"{100*float(textbook.group(1)) if textbook else float('nan'):8.1f}%   {slots:<22} "
      f"{summ['activation_bytes']/1e6:.1f} MB")
PYEOF
done
"$py" - "$work" <<'PYEOF'
import json, sys
w = sys.argv[1]
one = json.load(open(f"{w}/one/summary.json"))
print(f"one process, same batch: {one['train_tokens_per_s']:.0f} tokens/s; activations {one['activation_bytes']/1e6:.1f} MB")
for s in ("gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-v"):
    r = json.load(open(f"{w}/{s}/summary.json"))
    print(f"  {s:<18} {r['train_tokens_per_s']:.0f} tokens/s ({r['train_tokens_per_s']/one['train_tokens_per_s']:.2f}x), "
          f"{r['pp_bytes_sent_per_pass']/1e6:.2f} MB sent per pass by rank 0")
PYEOF
