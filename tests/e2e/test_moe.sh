#!/usr/bin/env bash
# The mixture-of-experts decoder (model.kind = moe): PyTorch parity (tests/python/moe_reference.py:
# logits, every gradient with the balance loss's share, a 10-step AdamW trajectory) for a softmax
# router with renormalised top-2, a sigmoid router without, every other block sparse with a tied head,
# top-1 with a large balance coefficient, a capacity that drops copies, and a shared expert; DDP 2, FSDP 2 and PP 2 (1F1B, ZB-H1) end with one
# process's weights (relative 1e-5, dropout on, 30 steps across an epoch end); the tiny preset trains
# and generates, and its report charts each expert's load and the aux loss; settings the layer
# cannot take are one line each.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to compare weights"
config="$work/seed.toml"
printf '[train]\nseed = 1\n' >"$config"
model=(--config "$config" --set model.kind=moe --set data.dir="$work/data" --set model.dim=32 --set model.heads=4
  --set model.kv_heads=2 --set model.layers=2 --set model.experts=4 --set model.top_k=2 --set model.expert_ff=16
  --set model.seq_len=32)

# 1. parity with the PyTorch reference
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  parity() {  # $1 = name, then settings
    "$bin/dtrain" debug dump "${model[@]}" --set data.stride=32 --set train.batch_size=4 "${@:2}" --out "$work/$1" \
      --steps 10 >/dev/null
    /usr/bin/python3 "$src/tests/python/parity.py" "$work/$1" --rtol 1e-5 || fail "moe parity ($1)"
  }
  parity softmax
  parity sigmoid --set model.router=sigmoid --set model.norm_topk=false
  parity every_other --set model.moe_every=2 --set model.layers=4 --set model.tied=true
  parity top1 --set model.top_k=1 --set model.aux_loss_coef=0.5
  parity capacity --set model.capacity_factor=0.5
  parity shared --set model.shared_ff=32 --set model.router=sigmoid
else
  echo "note: /usr/bin/python3 has no torch: the parity part is skipped (install python3-torch)"
fi

# 2. every layout reproduces one process
steps=30
common=("${model[@]}" --set data.stride="$(epoch_stride 32 8 $steps)" --set train.max_steps=$steps
  --set train.log_every=1 --set train.progress=false --set train.eval_max_batches=2 --set model.dropout=0.1
  --set optim.name=sgd --set optim.momentum=0.9 --set train.lr=0.05 --set optim.warmup_steps=0 --set train.epochs=0
  --set model.aux_loss_coef=0.1)
one() { run_one "$1" --set train.threads=2 --set train.batch_size=8 "${@:2}"; }
ranks() { run_ranks "$1" "$2" --set train.threads=1 "${@:3}"; }
one single
ranks ddp2 2 --set train.batch_size=4
ranks fsdp2 2 --set train.batch_size=4 --set parallel.dp_shard=2 --set parallel.dp_replicate=1
ranks pp2 2 --set train.batch_size=8 --set parallel.pp=2 --set parallel.dp_replicate=1
ranks pp2_zb 2 --set train.batch_size=8 --set parallel.pp=2 --set parallel.dp_replicate=1 --set parallel.pp_schedule=zb-h1
for r in ddp2 fsdp2 pp2 pp2_zb; do same_weights single $r 1e-5; done
"$py" "$src/tests/python/compare_losses.py" "$work" "$steps" single:ddp2:1e-5 single:fsdp2:1e-5 single:pp2:1e-5 ||
  fail "a layout's losses differ"
grep -q "experts of ff 16, top 2 (softmax)" "$work/single.out" || fail "the run did not describe its experts"

# 3. the preset trains on the built-in corpus and its model generates
"$bin/dtrain" train --config "$src/configs/moe-tiny.toml" --set data.dir="$work/data" --set train.epochs=1 \
  --set train.max_steps=20 --set train.progress=false --run-dir "$work/tiny" >"$work/tiny.out" 2>&1 ||
  { cat "$work/tiny.out"; fail "configs/moe-tiny.toml did not train"; }
"$bin/dtrain" generate --checkpoint "$work/tiny/model_final" --prompt "the" --tokens 5 >"$work/gen.out" 2>&1 ||
  { cat "$work/gen.out"; fail "generate from the moe model failed"; }
# its weights leave under Qwen3-MoE's names and come back byte for byte
"$bin/dtrain" ckpt export "$work/tiny/model_final" --out "$work/moe.safetensors" >/dev/null
"$bin/dtrain" ckpt import "$work/moe.safetensors" --config "$work/moe.config.json" --out "$work/imported" >/dev/null
"$bin/dtrain" ckpt export "$work/imported" --out "$work/again.safetensors" >/dev/null
cmp "$work/moe.safetensors" "$work/again.safetensors" || fail "the moe weights did not come back from export and import"
"$py" - "$work/moe.safetensors" <<'PY' || fail "the export lacks Qwen3-MoE's names"
import json, struct, sys
f = open(sys.argv[1], "rb")
names = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
for n in ("model.layers.0.mlp.gate.weight", "model.layers.3.mlp.experts.7.down_proj.weight"):
    assert n in names, (n, sorted(names)[:12])
PY
# its report shows the routing: a bar per sparse block of each expert's share (matching the shares
# metrics.jsonl's tokens_per_expert give over the run), each block's imbalance and the aux loss over steps
"$bin/dtrain" report "$work/tiny" >"$work/report.out" 2>&1 || { cat "$work/report.out"; fail "dtrain report of the moe run"; }
"$py" - "$work/tiny" "$src/configs/moe-tiny.toml" <<'EOF' || fail "the moe run's report (see above)"
import json, re, sys, xml.etree.ElementTree as ET
run, preset = sys.argv[1:]
key = lambda k: int(re.search(rf"^{k}\s*=\s*(\d+)", open(preset).read(), re.M).group(1))
experts, layers = key("experts"), key("layers")  # every block sparse (no moe_every)
root = ET.parse(f"{run}/report.html").getroot()
charts = {s.get("aria-label"): s for s in root.iter("svg")}
texts = lambda e: ["".join(t.itertext()) for t in e.iter("text")]
problems = []
bars = charts.get("Expert load by layer")
if bars is None: sys.exit(f"no expert load chart among {list(charts)}")
legend = [g for g in bars.iter("g") if g.get("class") == "legend"]
if not legend or texts(legend[0]) != [f"expert {e}" for e in range(experts)]:
    problems.append(f"expert load legend {texts(legend[0]) if legend else None}, expected expert 0..{experts - 1}")
groups = [g for g in bars.iter("g") if g.get("class") == "bar"]
if [g.get("data-name") for g in groups] != [f"layer {l}" for l in range(layers)]:
    problems.append(f"expert load bars {[g.get('data-name') for g in groups]}, expected layer 0..{layers - 1}")
recs = [r for r in map(json.loads, open(f"{run}/metrics.jsonl")) if r.get("type") == "train"]
prev, total = 0, [[0.0] * experts for _ in range(layers)]
for r in recs:  # each record's per-step means times the steps it covers
    for l, row in enumerate(r["tokens_per_expert"]):
        for e, t in enumerate(row): total[l][e] += (r["step"] - prev) * t
    prev = r["step"]
for l, g in enumerate(groups):
    shown = {}
    for rect in g.iter("rect"):
        m = re.fullmatch(r"expert (\d+): \S+ \(([\d.]+)%\)", "".join(rect.find("title").itertext()))
        if m: shown[int(m.group(1))] = float(m.group(2))
    want = [100 * t / sum(total[l]) for t in total[l]]
    if any(abs(shown.get(e, 0.0) - w) > 0.051 for e, w in enumerate(want)):
        problems.append(f"layer {l}: shares shown {shown}, metrics.jsonl gives {[round(w, 2) for w in want]}")
series = lambda svg: [g.get("data-name") for g in svg.iter("g") if g.get("class") == "series"]
im = charts.get("Busiest expert over the mean")
if im is None or series(im) != [f"layer {l}" for l in range(layers)]:
    problems.append(f"imbalance series {series(im) if im is not None else None}")
aux = charts.get("Aux loss (load balancing)")
if aux is None or series(aux) != ["aux loss"]: problems.append(f"aux loss chart {series(aux) if aux is not None else None}")
if problems: sys.exit("\n".join(problems))
print(f"ok  moe report: {layers} bars of {experts} experts' shares, imbalance and aux loss over {len(recs)} records")
EOF

# 4. what the layer cannot take, one line each
expect_one_error "top_k above experts" "model.top_k = 5 is more than model.experts = 4" \
  "$bin/dtrain" train "${common[@]}" --set model.top_k=5 --run-dir "$work/e1"
expect_one_error "no sparse block" "model.moe_every = 3 leaves none of the 2 blocks a mixture of experts" \
  "$bin/dtrain" train "${common[@]}" --set model.moe_every=3 --run-dir "$work/e2"
rc=0
"$bin/dtrun" --standalone --nproc-per-node 2 "$bin/dtrain" train "${common[@]}" --set train.threads=1 \
  --set parallel.tp=2 --set parallel.tp_sequence=true --set parallel.dp_replicate=1 --run-dir "$work/e3" \
  >"$work/e3.out" 2>&1 || rc=$?
[ "$rc" -ne 0 ] && grep -q "dtrain: error: model.kind = moe routes whole rows: parallel.tp_sequence = true" "$work/e3.out" ||
  { cat "$work/e3.out"; fail "moe under sequence parallel was not refused"; }
echo "PASS: moe parity (softmax, sigmoid, every other block, top-1, capacity, shared expert), DDP/FSDP/PP reproduce one process, preset and its report"
