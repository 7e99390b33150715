#!/usr/bin/env bash
# `dtrain plan` for a whole job: the memory it predicts for a rank is built by the code a run
# allocates with, so for each layout (1 process, DDP 2, FSDP 2, TP 2 + SP, PP 2 under two schedules,
# CP 2, EP 2, recompute, bf16) its model state, gather buffers, activations and the CPU kernels' scratch
# equal the run's own account (summary.json) byte for byte; the search ranks layouts that fit and says why the others lost; a
# 1024-rank plan prints; an out-of-memory start names a layout that fits, which then runs; bad input
# is one line.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to read summary.json"
d=$bin/dtrain
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=32
  --set model.heads=2 --set model.layers=2 --set model.ff_dim=64 --set model.seq_len=16
  --set train.batch_size=8 --set data.stride=64 --set train.threads=1 --set train.progress=false
  --set train.eval_every=0 --set train.max_steps=2)

# check NAME RANKS MESH [extra --set ...]: the run's account against the plan's, part by part
check() {
  local name=$1 n=$2 mesh=$3; shift 3
  local sets=() k v
  for kv in ${mesh//,/ }; do
    k=${kv%%=*} v=${kv#*=}
    case $k in
      sp) sets+=(--set parallel.tp_sequence=$([ "$v" = 1 ] && echo true || echo false)) ;;
      schedule) sets+=(--set parallel.pp_schedule="$v") ;;
      m) sets+=(--set parallel.microbatches="$v") ;;
      v) sets+=(--set parallel.pp_virtual="$v") ;;
      recompute) sets+=(--set train.recompute="$v") ;;
      *) sets+=(--set parallel."$k"="$v") ;;
    esac
  done
  if [ "$n" = 1 ]; then run_one "$name" "${sets[@]}" "$@"; else run_ranks "$name" "$n" "${sets[@]}" "$@"; fi
  local hw=()  # a CPU without bf16 products is planned on a profile that says so
  "$py" -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1])).get("bf16_products", True) else 1)' \
    "$work/$name/summary.json" || hw=(--hardware "$no_bf16")
  "$d" plan "${common[@]}" "$@" "${hw[@]}" --world "$n" --mesh "$mesh" --json >"$work/$name.plan.json" ||
    fail "dtrain plan --mesh $mesh failed: $(cat "$work/$name.plan.json")"
  "$py" - "$work/$name/summary.json" "$work/$name.plan.json" "$name" <<'PYEOF' || fail "$name: plan and run differ"
import json, sys
run, plan, name = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
mem = plan["memory"]
mem = next(r for r in plan["ranks"] if r["rank"] == 0)  # summary.json's parts are rank 0's
parts = ("model_state_bytes", "gather_buffer_bytes", "activation_bytes", "context_buffer_bytes", "kernel_scratch_bytes")
bad = [k for k in parts if run[k] != mem[k]]
for k in bad: print(f"{name}: {k} run {run[k]} plan {mem[k]}")
planned = sum(mem[k] for k in parts)
print(f"ok  {name}: {plan['layout']}: rank 0's model state, gather buffers, activations, context buffers and "
      f"kernel scratch planned {planned / 2**20:.2f} MiB, the run's own account the same")
sys.exit(1 if bad else 0)
PYEOF
}

# cpu.toml as `--calibrate` would write it on a CPU without bf16 products (AVX2 only)
no_bf16=$work/cpu-no-bf16.toml
sed 's/^bf16_products = true/bf16_products = false/' "$src/configs/hardware/cpu.toml" >"$no_bf16"
grep -q '^bf16_products = false' "$no_bf16" || fail "configs/hardware/cpu.toml should say bf16_products = true"

check one 1 pp=1
check ddp2 2 dp_replicate=2
check fsdp2 2 dp_shard=2
check tp2sp 2 tp=2,sp=1
check pp2-1f1b 2 pp=2,schedule=1f1b,m=4
check pp2-gpipe 2 pp=2,schedule=gpipe,m=2
check cp2 2 cp=2
check recompute 1 pp=1,recompute=full
common=(--config "$src/configs/moe-tiny.toml" --set data.dir="$work/data" --set model.dim=32 --set model.heads=2
  --set model.kv_heads=1 --set model.layers=2 --set model.expert_ff=32 --set model.seq_len=16 --set train.batch_size=8
  --set data.stride=64 --set train.threads=1 --set train.progress=false --set train.eval_every=0 --set train.max_steps=2)
check ep2 2 dp_shard=2,ep=2
# (the products' bf16 copies of their operands; a CPU without bf16 products computes and keeps f32)
check bf16 1 pp=1 --set train.precision=bf16
# On a profile without bf16 products, a bf16 job is planned as the f32 one, on this CPU or any.
for p in f32 bf16; do
  "$d" plan "${common[@]}" --set train.precision=$p --hardware "$no_bf16" --world 1 --mesh pp=1 --json \
    >"$work/no-bf16-$p.plan.json" || fail "dtrain plan on a profile without bf16 products failed"
done
"$d" plan "${common[@]}" --set train.precision=bf16 --world 1 --mesh pp=1 --json >"$work/bf16-products.plan.json"
"$py" - "$work" <<'PYEOF' || fail "a profile without bf16 products should plan bf16 as f32"
import json, sys
rank0 = lambda f: next(r for r in json.load(open(f"{sys.argv[1]}/{f}.plan.json"))["ranks"] if r["rank"] == 0)
f32, bf16, products = rank0("no-bf16-f32"), rank0("no-bf16-bf16"), rank0("bf16-products")
parts = ("model_state_bytes", "activation_bytes", "kernel_scratch_bytes")
bad = [k for k in parts if f32[k] != bf16[k]]
for k in bad: print(f"{k}: f32 {f32[k]}, bf16 without bf16 products {bf16[k]}")
if products["activation_bytes"] >= f32["activation_bytes"]:
    bad.append(f"with bf16 products the activations should be fewer bytes: {products['activation_bytes']}")
    print(bad[-1])
print(f"ok  without bf16 products bf16 plans f32's {bf16['activation_bytes']} bytes of activations "
      f"(with them {products['activation_bytes']})")
sys.exit(1 if bad else 0)
PYEOF

common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=32
  --set model.heads=2 --set model.layers=2 --set model.ff_dim=64 --set model.seq_len=16
  --set train.batch_size=8 --set data.stride=64 --set train.threads=1 --set train.progress=false
  --set train.eval_every=0 --set train.max_steps=2)

# The search: layouts ranked, the best one explained, the losers named with why.
"$d" plan "${common[@]}" --world 4 --top 4 >"$work/search.out" || fail "the search failed: $(cat "$work/search.out")"
grep -q "layouts considered" "$work/search.out" && grep -q "^best: " "$work/search.out" &&
  grep -q "why the others lost" "$work/search.out" || fail "the search should rank and explain: $(cat "$work/search.out")"
echo "ok  search at 4 ranks: $(grep '^best:' "$work/search.out")"
"$d" plan "${common[@]}" --world 4 --json >"$work/search.json"
"$py" - "$work/search.json" <<'PYEOF' || fail "the search's JSON is wrong"
import json, sys
s = json.load(open(sys.argv[1]))
fit = [l for l in s["layouts"] if l.get("fits")]
assert fit and all(a["step_s"] <= b["step_s"] for a, b in zip(fit, fit[1:])), "fitting layouts fastest first"
assert all(l["pp"] * l["dp_replicate"] * l["dp_shard"] * l["cp"] * l["tp"] == 4 for l in s["layouts"])
print(f"ok  {len(s['layouts'])} layouts in the JSON, {len(fit)} fit, fastest first")
PYEOF

# At scale, on a described machine.
"$d" plan --config "$src/configs/llama-small.toml" --set model.vocab_size=32000 --world 1024 --hardware h100 --top 3 \
  >"$work/big.out" || fail "the 1024-rank plan failed: $(cat "$work/big.out")"
grep -q "on 1024 ranks of H100 SXM" "$work/big.out" && grep -q "^best: " "$work/big.out" ||
  fail "the 1024-rank plan should name the machine and a best layout: $(cat "$work/big.out")"
echo "ok  1024 H100s: $(grep 'layouts considered' "$work/big.out")"

# Out of memory: `dtrain train` names the planner's layout of its world that fits, and that layout runs
# under the same limit (address space: ulimit -v, per process).
oom=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.seq_len=64
  --set train.batch_size=1024 --set train.max_steps=1 --set train.eval_every=0 --set train.threads=1
  --set train.progress=false)
rc=0
(ulimit -v 3000000; "$bin/dtrun" --standalone --nproc-per-node 2 "$d" train "${oom[@]}" --run-dir "$work/oom") \
  >"$work/oom.out" 2>&1 || rc=$?
grep -q "does not fit in this machine's memory" "$work/oom.out" && grep -q "the planner finds a layout of 2 ranks that fits" "$work/oom.out" ||
  fail "an out-of-memory start should name a layout that fits (rc $rc): $(cat "$work/oom.out")"
read -r -a fits <<<"$(grep -o "that fits: [^:]*: \(--set [^ ]* \?\)*" "$work/oom.out" | head -1 | sed 's/^[^-]*--set/--set/')"
[ ${#fits[@]} -ge 8 ] || fail "no --set options in: $(cat "$work/oom.out")"
(ulimit -v 3000000; "$bin/dtrun" --standalone --nproc-per-node 2 "$d" train "${oom[@]}" "${fits[@]}" --run-dir "$work/oom2") \
  >"$work/oom2.out" 2>&1 || fail "the planner's layout did not run under the same limit: $(tail -3 "$work/oom2.out")"
echo "ok  out of memory at DDP 2; the planner's layout runs: ${fits[*]}"

expect_one_error "a mesh not the world" "makes 4 ranks, --world is 2" \
  "$d" plan "${common[@]}" --world 2 --mesh dp_shard=4
expect_one_error "an unknown profile" "--hardware nosuch: no such file" \
  "$d" plan "${common[@]}" --hardware nosuch
expect_one_error "an unknown mesh key" "unknown \`pq\`" \
  "$d" plan "${common[@]}" --mesh pq=2
