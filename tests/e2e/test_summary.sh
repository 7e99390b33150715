#!/usr/bin/env bash
# The numbers a run reports mean what they say: summary.json's world_size is the ranks (TP 2 on 2
# ranks: 2, with dp_size 1) and its peak memory the largest of any rank's, naming which; a run whose
# max_steps is a multiple of checkpoint_every saves its last step once; the test record carries the
# epoch of the last step; a sharded checkpoint record's bytes are the whole checkpoint's.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to read summary.json and metrics.jsonl"
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=32
  --set model.heads=2 --set model.layers=1 --set model.ff_dim=64 --set model.seq_len=16
  --set train.batch_size=8 --set data.stride=16 --set train.threads=1 --set train.progress=false
  --set train.eval_max_batches=2 --set train.max_steps=10 --set train.checkpoint_every=5 --set train.log_every=1)
run_ranks tp2 2 --set parallel.tp=2
"$py" - "$work/tp2" <<'EOF' || fail "summary.json or metrics.jsonl of the TP 2 run (see above)"
import json, sys
run = sys.argv[1]
s = json.load(open(f"{run}/summary.json"))
problems = []
if s["world_size"] != 2: problems.append(f"world_size {s['world_size']}, expected 2 ranks")
if s["dp_size"] != 1: problems.append(f"dp_size {s['dp_size']}, expected 1")
by_rank = s["peak_rss_mb_by_rank"]
if len(by_rank) != 2 or s["peak_rss_mb"] != max(by_rank) or by_rank[s["peak_rss_rank"]] != s["peak_rss_mb"]:
    problems.append(f"peak_rss_mb {s['peak_rss_mb']} (rank {s['peak_rss_rank']}) is not the largest of {by_rank}")
recs = [json.loads(l) for l in open(f"{run}/metrics.jsonl")]
saves = [r["step"] for r in recs if r["type"] == "checkpoint"]
if saves != [5, 10]: problems.append(f"checkpoints saved at steps {saves}, expected [5, 10] (each once)")
test = [r for r in recs if r["type"] == "test"]
if len(test) != 1 or test[0]["epoch"] != 1: problems.append(f"test record {test}: expected one, in epoch 1")
idx = json.load(open(f"{run}/checkpoints/step_000000010/index.json"))
total = sum(c["byte_size"] for t in idx["tensors"].values() for c in t["chunks"])
rec = [r for r in recs if r["type"] == "checkpoint" and r["step"] == 10][0]
if rec["format"] != "sharded" or rec["bytes"] != total:
    problems.append(f"checkpoint record {rec}: expected sharded with the index's {total} bytes")
if problems: sys.exit("; ".join(problems))
print(f"ok  TP 2 on 2 ranks: world_size 2, dp_size 1, peak {s['peak_rss_mb']:.0f} MiB on rank {s['peak_rss_rank']} "
      f"of {by_rank}; saves at {saves}; checkpoint bytes {total}")
EOF
echo PASS
