#!/usr/bin/env bash
# `dtrain scale`: a strong study over 1 and 2 workers trains each point under dtrun and writes
# scaling.csv (a row per point, the documented columns, the batch split, speedup and efficiency) and a
# well-formed, self-contained scaling.html; a weak one from 2 workers counts 2 as ideal. What a
# user can get wrong is one error line before anything runs (a worker count that does not divide
# the batch, a bad list or mode, a run dir already used, srun outside an allocation), and a point
# that fails names its log. Needs the step timing of docs/watching.md in summary.json.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to read scaling.csv and scaling.html"
small=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=32 --set model.heads=2
  --set model.layers=1 --set model.ff_dim=64 --set model.seq_len=16 --set train.batch_size=8 --set data.stride=16
  --set train.eval_max_batches=2)

expect_one_error "batch not divided" "--nproc 3 does not divide train.batch_size = 8" \
  "$bin/dtrain" scale "${small[@]}" --nproc 1,3 --out "$work/bad"
[ ! -e "$work/bad" ] || fail "the study made $work/bad before refusing its worker counts"
expect_one_error "bad list" "--nproc 1,x: \`x\` is not a worker count" "$bin/dtrain" scale "${small[@]}" --nproc 1,x --out "$work/bad"
expect_one_error "twice" "names 2 twice" "$bin/dtrain" scale "${small[@]}" --nproc 2,1,2 --out "$work/bad"
expect_one_error "bad mode" "--mode fast: use strong" "$bin/dtrain" scale "${small[@]}" --nproc 1 --mode fast --out "$work/bad"
expect_one_error "srun outside Slurm" "SLURM_JOB_ID is not set" \
  env -u SLURM_JOB_ID "$bin/dtrain" scale "${small[@]}" --nproc 1 --launcher srun --out "$work/bad"
expect_one_error "point fails" "point nproc 1 failed (exit status 1): see its log $work/broken/nproc_1.log" \
  "$bin/dtrain" scale "${small[@]}" --set data.dir="$work/nowhere" --nproc 1,2 --out "$work/broken"
grep -q "dtrain: error: " "$work/broken/nproc_1.log" || fail "the failed point's log lacks its error"
[ ! -e "$work/broken/nproc_2" ] || fail "the study went on past a failed point"

"$bin/dtrain" scale "${small[@]}" --nproc 1,2 --steps 6 --out "$work/strong" >"$work/strong.out" 2>&1 ||
  { cat "$work/strong.out"; for f in "$work"/strong/*.log; do tail -5 "$f"; done; fail "the strong study failed"; }
[ "$(grep -c '^nproc [12]: ' "$work/strong.out")" -eq 2 ] || { cat "$work/strong.out"; fail "expected a line per point"; }
expect_one_error "run dir used" "$work/strong/nproc_1 already holds a run" \
  "$bin/dtrain" scale "${small[@]}" --nproc 1,2 --steps 6 --out "$work/strong"
"$bin/dtrain" scale "${small[@]}" --nproc 2 --mode weak --steps 6 --out "$work/weak" >"$work/weak.out" 2>&1 ||
  { cat "$work/weak.out"; fail "the weak study failed"; }
# train.global_batch: kept at every point (strong), grown with the workers (weak); what each point ran.
for mode in strong weak; do
  "$bin/dtrain" scale "${small[@]}" --set train.global_batch=16 --nproc 1,2 --mode $mode --steps 3 \
    --out "$work/g_$mode" >"$work/g_$mode.out" 2>&1 || { cat "$work/g_$mode.out"; fail "the $mode global-batch study"; }
done
"$py" - "$work" <<'EOF' || fail "a study with train.global_batch reports batches its points did not run"
import csv, json, sys
work = sys.argv[1]
for mode, want in (("strong", [("1", "8", "16"), ("2", "8", "16")]), ("weak", [("1", "8", "16"), ("2", "8", "32")])):
    rows = [(r["workers"], r["per_rank_batch"], r["global_batch"]) for r in csv.DictReader(open(f"{work}/g_{mode}/scaling.csv"))]
    if rows != want: sys.exit(f"{mode}: {rows}, expected {want}")
    for w, _, g in rows:
        ran = json.load(open(f"{work}/g_{mode}/nproc_{w}/config.json"))["train"]["global_batch"]
        if ran != int(g): sys.exit(f"{mode}: nproc_{w} ran train.global_batch = {ran}, the CSV says {g}")
print("ok  train.global_batch: strong keeps 16, weak grows 16 → 32; each point ran what the CSV says")
EOF

"$py" - "$work" <<'EOF' || fail "scaling.csv or scaling.html (see above)"
import csv, sys, json, xml.etree.ElementTree as ET
work = sys.argv[1]
problems = []
head = ["workers", "per_rank_batch", "global_batch", "tokens_per_s", "step_seconds", "speedup", "efficiency"]
PHASES = ["data", "forward", "backward", "optimizer", "comm", "checkpoint", "eval", "other"]
rows = list(csv.reader(open(f"{work}/strong/scaling.csv")))
if rows[0][:7] != head: problems.append(f"columns {rows[0]}, expected {head} first")
if [c for c in rows[0][7:]] != [p + "_s" for p in PHASES]: problems.append(f"phase columns {rows[0][7:]}")
pts = [dict(zip(rows[0], r)) for r in rows[1:]]
if len(pts) != 2: problems.append(f"{len(pts)} rows, expected 2")
else:
    if [(p["workers"], p["per_rank_batch"], p["global_batch"]) for p in pts] != [("1", "8", "8"), ("2", "4", "8")]:
        problems.append(f"strong batches {[(p['workers'], p['per_rank_batch'], p['global_batch']) for p in pts]}")
    if float(pts[0]["speedup"]) != 1 or float(pts[0]["efficiency"]) != 1: problems.append("1 worker: speedup and efficiency not 1")
    tps = [float(p["tokens_per_s"]) for p in pts]
    want = tps[1] / tps[0]
    if abs(float(pts[1]["speedup"]) - want) > 1e-4 * want: problems.append(f"2 workers: speedup {pts[1]['speedup']}, expected {want}")
    if abs(float(pts[1]["efficiency"]) - want / 2) > 1e-4: problems.append("2 workers: efficiency is not speedup / 2")
    for p in pts:
        s = json.load(open(f"{work}/strong/nproc_{p['workers']}/summary.json"))
        if s["world_size"] != int(p["workers"]): problems.append(f"nproc_{p['workers']} ran on {s['world_size']} ranks")
        if abs(float(p["step_seconds"]) - s["step_time"]["mean_s"]) > 1e-5 * s["step_time"]["mean_s"]:
            problems.append(f"nproc_{p['workers']}: step_seconds is not step_time.mean_s")
weak = list(csv.DictReader(open(f"{work}/weak/scaling.csv")))
if len(weak) != 1 or (weak[0]["per_rank_batch"], weak[0]["global_batch"]) != ("8", "16") or float(weak[0]["speedup"]) != 2:
    problems.append(f"weak from 2 workers: {weak}")
for d in ("strong", "weak"):
    text = open(f"{work}/{d}/scaling.html", encoding="utf-8").read()
    for bad in ("http://", "https://", "<script", "url("):
        if bad in text: problems.append(f"{d}/scaling.html holds {bad!r}")
    try:
        svgs = list(ET.fromstring(text).iter("svg"))
        if len(svgs) != 4: problems.append(f"{d}/scaling.html: {len(svgs)} charts, expected 4")
    except ET.ParseError as e:
        problems.append(f"{d}/scaling.html is not well-formed: {e}")
if "not 1" not in open(f"{work}/weak/scaling.html").read(): problems.append("weak from 2: the page does not say speedup is relative to 2")
if problems: sys.exit("\n".join(problems))
print(f"ok  strong 1,2: {[(p['workers'], p['tokens_per_s'], p['speedup']) for p in pts]}; weak from 2: speedup 2")
EOF
echo PASS
