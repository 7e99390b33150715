#!/usr/bin/env bash
# Watching a job (docs/watching.md) on DDP 2, FSDP 2, TP 2 and PP 2: each train record's phases add
# up to its step time, and the step times add up to the wall time between records (within 5%); the
# summary's step_time names every phase and its slowest rank; RUN/trace.json holds both ranks'
# steps, phases, units (forward and backward) and collectives with their sizes, only for the
# steps asked, and a pipeline's actions, each track's spans nested as Perfetto stacks them; both ranks' resource samples are in metrics.jsonl, their
# maxima in summary.json; TensorBoard has the tags people plot; a malformed trace_steps is one line.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to read metrics.jsonl, summary.json and trace.json"
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=32
  --set model.heads=2 --set model.layers=2 --set model.ff_dim=64 --set model.seq_len=16
  --set train.batch_size=8 --set data.stride=16 --set train.threads=1 --set train.progress=false
  --set train.eval_max_batches=2 --set train.max_steps=12 --set train.log_every=3 --set train.checkpoint_every=6
  --set train.trace=true --set train.trace_steps=4:5 --set train.sample_every_s=0.2)
run_ranks ddp 2
run_ranks fsdp 2 --set parallel.dp_shard=2
run_ranks tp 2 --set parallel.tp=2
run_ranks pp 2 --set parallel.pp=2 --set parallel.dp_replicate=1 --set parallel.microbatches=2
for layout in ddp fsdp tp pp; do
  grep -q "^\[0\]: step time: " "$work/$layout.out" || { cat "$work/$layout.out"; fail "$layout: no step-time table"; }
  "$py" - "$work/$layout" "$layout" <<'PYEOF' || fail "$layout: see above"
import json, re, sys
run, layout = sys.argv[1], sys.argv[2]
PHASES = ["data", "forward", "backward", "optimizer", "comm", "checkpoint", "eval", "other"]
problems = []
recs = [json.loads(l) for l in open(f"{run}/metrics.jsonl")]
train = [r for r in recs if r["type"] == "train"]
if [r["step"] for r in train] != [3, 6, 9, 12]: problems.append(f"train records at {[r['step'] for r in train]}")
for r in train:
    for k in ["step_seconds", "phases", "step_seconds_by_rank", "phases_by_rank", "t", "tokens_per_s",
              "samples_per_s", "tflops_per_rank", "mfu", "lr"]:
        if k not in r: problems.append(f"step {r['step']}: no {k}")
    if problems: break
    if sorted(r["phases"]) != sorted(PHASES): problems.append(f"phases {sorted(r['phases'])}")
    for rank, (secs, ph) in enumerate(zip(r["step_seconds_by_rank"], r["phases_by_rank"])):
        if abs(sum(ph.values()) - secs) > 1e-6 * max(secs, 1e-3):
            problems.append(f"step {r['step']} rank {rank}: phases add up to {sum(ph.values())}, step {secs}")
# the steps' time is the time between records (nothing lost between step ends)
for a, b in zip(train, train[1:]):
    wall = (b["t"] - a["t"]) / (b["step"] - a["step"])
    if abs(b["step_seconds"] - wall) > 0.05 * wall:
        problems.append(f"steps {a['step']}..{b['step']}: {b['step_seconds']:.4f} s per step by the phases, "
                        f"{wall:.4f} s by the clock")
s = json.load(open(f"{run}/summary.json"))
st = s["step_time"]
if st["warmup_steps"] != 1 or st["steps"] != 11: problems.append(f"step_time covers {st['steps']} steps after {st['warmup_steps']}")
share = sum(p["share"] for p in st["phases"].values())
if abs(share - 1) > 0.05: problems.append(f"the phases' shares add up to {share}")
if len(st["by_rank"]) != 2: problems.append("step_time.by_rank is not per rank")
for p in ["forward", "backward", "optimizer"]:
    if st["phases"][p]["mean_s"] <= 0: problems.append(f"no {p} time")
comm = max(r["phases"]["comm"] for r in st["by_rank"])
if comm <= 0: problems.append("no exposed communication on either rank")
if st["phases"]["checkpoint"]["mean_s"] <= 0: problems.append("the step-6 checkpoint's stall is not in the steps")
for k in ["steady_tokens_per_s", "tflops_per_rank"]:
    if not s[k] > 0: problems.append(f"summary {k} = {s[k]}")
# the trace: both ranks, only steps 4 and 5, units, collectives with sizes
t = json.load(open(f"{run}/trace.json"))
ev = [e for e in t["traceEvents"] if e["ph"] == "X"]
tracks = {(e["pid"], e["cat"]) for e in ev}
for pid in (0, 1):
    steps = sorted(e["name"] for e in ev if e["pid"] == pid and e["cat"] == "steps")
    if steps != ["step 4", "step 5"]: problems.append(f"rank {pid}: step spans {steps}")
    units = {e["name"] for e in ev if e["pid"] == pid and e["cat"] == "compute"}
    if not any(u.endswith(" F") for u in units) or not any(re.search(r" [BI]$", u) for u in units):
        problems.append(f"rank {pid}: no units' forward and backward ({sorted(units)[:6]})")
    comm = [e for e in ev if e["pid"] == pid and e["cat"].startswith("comm ")]
    if not comm or not all(e["args"]["bytes"] >= 0 and e["args"]["group"] for e in comm):
        problems.append(f"rank {pid}: no collectives with sizes and groups")
    if not any(e["cat"] == "phases" and e["pid"] == pid for e in ev): problems.append(f"rank {pid}: no phases track")
    if layout == "pp" and not any(re.fullmatch(r"\d+[FBIW]\d+", e["name"]) for e in ev if e["pid"] == pid):
        problems.append(f"rank {pid}: no pipeline actions")
# resource samples of both ranks (one at the start, one at the end at least), their maxima, TensorBoard tags
res = [r for r in recs if r["type"] == "resource"]
for rank in (0, 1):
    mine = [r for r in res if r["rank"] == rank]
    if (len(mine) < 2 or not all(r["rss_mb"] > 0 and r["threads"] >= 2 and r["host"] for r in mine)
            or not any(r.get("cpu_percent", 0) > 0 for r in mine)):
        problems.append(f"rank {rank}: resource samples {mine[:2]}")
peak = s.get("resources", {}).get("max", {}).get("rss_mb")
if not peak or peak["value"] != max(r["rss_mb"] for r in res) or s["resources"]["samples"] != len(res):
    problems.append(f"summary resources {s.get('resources')} against {len(res)} samples")
import glob
events = open(glob.glob(f"{run}/events.out.tfevents.*")[0], "rb").read()
for tag in [b"Train/lr", b"Throughput/tokens_per_s", b"Throughput/tflops_per_rank", b"Phases/forward_ms",
            b"Phases/comm_ms", b"Resources/rank0/rss_mb", b"Resources/rank1/cpu_percent", b"Loss/test"]:
    if tag not in events: problems.append(f"TensorBoard has no {tag.decode()}")
# Perfetto draws a track's spans as a stack: each must end before the next one starts, or hold it
for pid, track in tracks:
    open_ends = []
    for e in sorted((e for e in ev if e["pid"] == pid and e["cat"] == track), key=lambda e: (e["ts"], -e["dur"])):
        if e["dur"] < 0: problems.append(f"rank {pid} {track}: {e['name']} lasts {e['dur']} us")
        while open_ends and open_ends[-1] <= e["ts"] + 1: open_ends.pop()
        if open_ends and e["ts"] + e["dur"] > open_ends[-1] + 1:
            problems.append(f"rank {pid} {track}: {e['name']} at {e['ts']:.0f} us overlaps the span it starts in")
            break
        open_ends.append(e["ts"] + e["dur"])
offs = t["otherData"]["clock_offsets_s"]
if len(offs) != 2 or offs[0] != 0: problems.append(f"clock offsets {offs}")
if problems: sys.exit(f"FAIL {layout}: " + "; ".join(problems))
print(f"ok  {layout}: step {1e3*st['mean_s']:.1f} ms = " +
      " + ".join(f"{k} {1e3*v['mean_s']:.1f}" for k, v in st["phases"].items() if v["mean_s"] > 0) +
      f"; trace: {len(ev)} spans on {len(tracks)} tracks of 2 ranks; {len(res)} resource samples")
PYEOF
done
# a run of one step (all of it warm-up) still reports that step
run_one single --set train.max_steps=1 --set train.log_every=1 --set train.trace=false
"$py" - "$work/single/summary.json" <<'PYEOF' || fail "the one-step run's step_time (see above)"
import json, sys
st = json.load(open(sys.argv[1]))["step_time"]
if st["steps"] != 1 or st["warmup_steps"] != 0 or not st["mean_s"] > 0:
    sys.exit(f"FAIL: one step: step_time {st['steps']} steps after {st['warmup_steps']}, mean {st['mean_s']}")
print(f"ok  one step: step_time holds it ({1e3*st['mean_s']:.1f} ms)")
PYEOF
expect_one_error "malformed trace_steps" "train.trace_steps" "$bin/dtrain" train "${common[@]}" \
  --set train.trace_steps=5:2 --run-dir "$work/bad"
echo PASS
