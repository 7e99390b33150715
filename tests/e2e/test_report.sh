#!/usr/bin/env bash
# `dtrain report` on made-up run dirs holding every record of docs/watching.md (2 ranks): it writes
# one self-contained page (no URL, no script, well-formed XML) with a memory series per rank, a
# phase table naming every phase and, for two runs, both overlaid in the same charts; a run without
# resource records says so, and one without experts shows no Experts section; an unfinished last
# line is left out; a missing folder, a folder without metrics.jsonl and a broken line are one error
# line each.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to parse the report"
synth() { "$py" "$src/tests/python/synthetic_run.py" "$@"; }
synth "$work/alpha" --ranks 2 --label '<b>"x" & y</b>'
synth "$work/beta" --ranks 2 --scale 1.3
synth "$work/gamma" --ranks 2 --no-resources

before=$(ls "$work/alpha")
"$bin/dtrain" report "$work/alpha" >"$work/one.out" 2>&1 || { cat "$work/one.out"; fail "dtrain report alpha failed"; }
[ "$(comm -13 <(echo "$before") <(ls "$work/alpha"))" = "report.html" ] || fail "report wrote other files than alpha/report.html"
(cd "$work" && "$bin/dtrain" report alpha beta >"$work/two.out" 2>&1) || { cat "$work/two.out"; fail "dtrain report alpha beta failed"; }
[ -f "$work/report.html" ] || fail "two runs: no report.html in the current dir"
"$bin/dtrain" report "$work/gamma" --out "$work/gamma.html" >/dev/null || fail "dtrain report gamma --out failed"
# a run still writing its last line
cp -r "$work/gamma" "$work/writing" && printf '{"type": "train", "st' >>"$work/writing/metrics.jsonl"
"$bin/dtrain" report "$work/writing" >/dev/null || fail "an unfinished last line stopped the report"

# A run named with bytes that are not UTF-8 text (0xff, U+FFFE) and an overlay of a language model
# with a classifier (its train records carry an accuracy): the page stays well-formed, each series
# says its own unit.
odd="$work/$(printf 'odd\xff\xef\xbf\xbe')"
cp -r "$work/gamma" "$odd" && "$bin/dtrain" report "$odd" --out "$work/odd.html" >/dev/null || fail "report of $odd"
cp -r "$work/gamma" "$work/clf"
"$py" -c 'import json,sys
p = sys.argv[1] + "/metrics.jsonl"
recs = [json.loads(l) for l in open(p)]
for r in recs:
    if r.get("type") == "train": r["accuracy"] = 0.5
open(p, "w").write("".join(json.dumps(r) + "\n" for r in recs))' "$work/clf"
"$bin/dtrain" report "$work/gamma" "$work/clf" --out "$work/mixed.html" >/dev/null || fail "report of a mixed overlay"

"$py" - "$work" <<'EOF' || fail "the reports (see above)"
import re, sys, xml.etree.ElementTree as ET
work = sys.argv[1]
problems = []
PHASES = ["data", "forward", "backward", "optimizer", "comm", "checkpoint", "eval", "other"]

def load(path):
    text = open(path, encoding="utf-8").read()
    for bad in ("http://", "https://", "<script", "<link", "@import", "url(", "src="):
        if bad in text: problems.append(f"{path}: holds {bad!r} (the page must need nothing from elsewhere)")
    try:
        return ET.fromstring(text)
    except ET.ParseError as e:
        problems.append(f"{path}: not well-formed: {e}")
        return ET.fromstring("<html/>")

def chart(root, title):
    found = [s for s in root.iter("svg") if s.get("aria-label") == title]
    return found[0] if found else None

def series(svg):
    return [g.get("data-name") for g in svg.iter("g") if g.get("class") == "series"]

def text_of(e):
    return "".join(e.itertext())

one = load(f"{work}/alpha/report.html")
svgs = list(one.iter("svg"))
if len(svgs) < 8: problems.append(f"alpha: {len(svgs)} charts, expected at least 8")
mem = chart(one, "Memory per rank")
if mem is None or series(mem) != ["rank 0", "rank 1"]:
    problems.append(f"alpha: memory chart series {series(mem) if mem is not None else None}, expected rank 0 and rank 1")
cpu = chart(one, "CPU per rank")
if cpu is None or len(series(cpu)) != 2: problems.append("alpha: no CPU chart with a series per rank")
loss = chart(one, "Loss")
if loss is None or series(loss) != ["train (step)", "train (epoch)", "validation", "test"]:
    problems.append(f"alpha: loss series {series(loss) if loss is not None else None}")
bars = chart(one, "Mean time per step and phase")
if bars is None or [g.get("data-name") for g in bars.iter("g") if g.get("class") == "bar"] != ["rank 0", "rank 1"]:
    problems.append("alpha: the phase bars are not one per rank")
tables = [t for t in one.iter("table") if [text_of(th) for th in t.iter("th")][:1] == ["phase"]]
if len(tables) != 1:
    problems.append(f"alpha: {len(tables)} phase tables, expected 1")
else:
    names = [text_of(tr.find("td")) for tr in tables[0].iter("tr") if tr.find("td") is not None]
    if names != PHASES + ["step"]: problems.append(f"alpha: phase table rows {names}, expected {PHASES + ['step']}")
pre = [text_of(p) for p in one.iter("pre")]
if len(pre) != 1 or '"note": "<b>\\"x\\" & y</b>"' not in pre[0]:
    problems.append(f"alpha: the config is not shown as written: {pre}")
if "Checkpoint stalls and writes" not in [s.get("aria-label") for s in svgs]: problems.append("alpha: no checkpoint chart")
if any(s.get("id") == "experts" for s in one.iter("section")):
    problems.append("alpha: an Experts section, but its records carry no mixture of experts' keys")

two = load(f"{work}/report.html")
loss2 = chart(two, "Loss")
legend = [text_of(t) for t in loss2.iter("text")] if loss2 is not None else []
for run in ("alpha", "beta"):
    if f"{run}: train (step)" not in legend: problems.append(f"two runs: the loss legend does not name {run}: {legend}")
mem2 = chart(two, "Memory per rank")
if mem2 is None or series(mem2) != ["alpha: rank 0", "alpha: rank 1", "beta: rank 0", "beta: rank 1"]:
    problems.append(f"two runs: memory series {series(mem2) if mem2 is not None else None}")
heads = [[text_of(th) for th in t.iter("th")] for t in two.iter("table")]
if ["", "alpha", "beta"] not in heads: problems.append(f"two runs: no table with a column per run: {heads}")

g = load(f"{work}/gamma.html")
if chart(g, "Memory per rank") is not None: problems.append("gamma: a memory chart without resource records")
said = [text_of(p) for p in g.iter("p") if "no resource records" in text_of(p).lower()]
if len(said) != 1: problems.append(f"gamma: should say once that it has no resource records, said {said}")
w = load(f"{work}/writing/report.html")
if chart(w, "Loss") is None: problems.append("writing: no loss chart")

load(f"{work}/odd.html")  # strict UTF-8 and XML: a byte or non-character that slipped through fails here
mixed = chart(load(f"{work}/mixed.html"), "Throughput")
texts = [text_of(t) for t in mixed.iter("text")] if mixed is not None else []
for want in ("gamma: tokens/s", "clf: samples/s", "tokens/s (language models), samples/s (classifiers) (all ranks)"):
    if want not in texts: problems.append(f"mixed overlay: no {want!r} in the throughput chart: {texts}")

if problems: sys.exit("\n".join(problems))
print(f"ok  report of 1 run ({len(svgs)} charts), of 2 runs overlaid, of a run without resources, of a run writing,"
      " of a run named with non-UTF-8 bytes, of a language model beside a classifier")
EOF

mkdir -p "$work/empty"
printf '{"type": "train", "step": 1}\n[1, 2]\n' >"$work/broken.jsonl"
mkdir -p "$work/broken" && cp "$work/broken.jsonl" "$work/broken/metrics.jsonl"
expect_one_error "missing dir" "$work/nowhere does not exist" "$bin/dtrain" report "$work/nowhere"
expect_one_error "no metrics.jsonl" "$work/empty is not a run dir: it holds no metrics.jsonl" "$bin/dtrain" report "$work/empty"
expect_one_error "one of two missing" "$work/nowhere" "$bin/dtrain" report "$work/alpha" "$work/nowhere"
expect_one_error "broken line" "metrics.jsonl line 2 is a JSON array" "$bin/dtrain" report "$work/broken"
expect_one_error "no run" "dtrain report needs a run dir" "$bin/dtrain" report
echo PASS
