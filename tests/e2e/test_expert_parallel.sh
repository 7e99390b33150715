#!/usr/bin/env bash
# Expert parallel end to end (model.kind = moe, 4 experts top-2, dropout on, SGD-momentum, 30 steps
# across an epoch end): ep 2 over FSDP 2, ep 4 over FSDP 4, ep 2 within FSDP 4 (each expert shard
# split over 2 ranks), ep 2 × HSDP (dp_replicate 2 × dp_shard 2), ep 2 × PP 2 (1F1B), cp 2 (the
# balance loss counted over each sequence's shares), ep 2 over cp 2 and ep 4 over cp 2 × FSDP 2 each end with
# one process's weights and losses (relative 1e-5), and so do ep 2, tp 2 (with a clipped gradient
# norm) and ep 2 × tp 2 with a capacity that drops token copies and a shared expert (ep 2 routes and
# drops the same copies, in metrics.jsonl); the ep 2 run's step-15 checkpoint (sharded, the
# experts under their global names) goes on at ep 1 in one process and at ep 4 to the same weights;
# summary.json counts the all-to-alls' bytes. An ep that does not divide dp_shard × cp or the
# experts, a capacity under context parallel, and a kind without experts, are refused in one line.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to compare weights"
steps=30
config="$work/seed.toml"
printf '[train]\nseed = 1\n' >"$config"
common=(--config "$config" --set model.kind=moe --set data.dir="$work/data" --set model.dim=32 --set model.heads=4
  --set model.kv_heads=2 --set model.layers=2 --set model.experts=4 --set model.top_k=2 --set model.expert_ff=16
  --set model.seq_len=32 --set data.stride="$(epoch_stride 32 8 $steps)" --set train.max_steps=$steps
  --set train.log_every=1 --set train.progress=false --set train.eval_max_batches=2 --set model.dropout=0.1
  --set optim.name=sgd --set optim.momentum=0.9 --set train.lr=0.05 --set optim.warmup_steps=0 --set train.epochs=0
  --set model.aux_loss_coef=0.1 --set train.checkpoint_every=15 --set train.keep_checkpoints=4)
ranks() { run_ranks "$1" "$2" --set train.threads=1 --set parallel.dp_replicate=1 "${@:3}"; }

run_one single --set train.threads=2 --set train.batch_size=8
ranks ep2 2 --set train.batch_size=4 --set parallel.dp_shard=2 --set parallel.ep=2
ranks ep4 4 --set train.batch_size=2 --set parallel.dp_shard=4 --set parallel.ep=4
ranks ep2_fsdp4 4 --set train.batch_size=2 --set parallel.dp_shard=4 --set parallel.ep=2
ranks ep2_hsdp 4 --set train.batch_size=2 --set parallel.dp_shard=2 --set parallel.dp_replicate=2 --set parallel.ep=2
ranks ep2_pp2 4 --set train.batch_size=4 --set parallel.dp_shard=2 --set parallel.pp=2 --set parallel.ep=2
# context parallel: the balance loss counts each sequence's copies over its shares; ep over cp alone
# (replicated: the experts' gradients reduced over the ranks holding them), and ep 4 over cp 2 × FSDP 2
ranks cp2 2 --set train.batch_size=8 --set parallel.cp=2
ranks ep2_cp2 2 --set train.batch_size=8 --set parallel.cp=2 --set parallel.ep=2
ranks ep4_cp2_fsdp2 4 --set train.batch_size=4 --set parallel.cp=2 --set parallel.dp_shard=2 --set parallel.ep=4 \
  --set parallel.cp_mode=alltoall
for r in ep2 ep4 ep2_fsdp4 ep2_hsdp ep2_pp2 cp2 ep2_cp2 ep4_cp2_fsdp2; do same_weights single $r 1e-5; done
"$py" "$src/tests/python/compare_losses.py" "$work" "$steps" single:ep2:1e-5 single:ep4:1e-5 single:ep2_pp2:1e-5 \
  single:ep2_cp2:1e-5 || fail "an expert-parallel layout's losses differ"
"$py" - "$work/single/metrics.jsonl" "$work/ep2_cp2/metrics.jsonl" <<'PY' || fail "ep 2 over cp 2 routed otherwise"
import json, sys
def train(path):
    return [r for r in map(json.loads, open(path)) if r["type"] == "train"]
for x, y in zip(train(sys.argv[1]), train(sys.argv[2])):
    assert x["tokens_per_expert"] == y["tokens_per_expert"], (x, y)
    assert abs(x["aux_loss"] - y["aux_loss"]) <= 1e-5 * x["aux_loss"], (x["aux_loss"], y["aux_loss"])
PY
"$py" - "$work/ep2/summary.json" <<'PY' || fail "summary.json does not count the all-to-alls"
import json, sys
s = json.load(open(sys.argv[1]))
assert s.get("ep") == 2 and s.get("ep_bytes_per_step", 0) > 0 and s.get("ep_exchanges_per_step", 0) >= 8, s
PY
grep -q "experts over ep 2" "$work/ep2.out" && grep -q "expert parallel: over 2 ranks, per step and rank" "$work/ep2.out" ||
  fail "the ep 2 run did not name its mesh or say what its all-to-alls moved"
echo "ok  ep 2, ep 4, ep 2 within FSDP 4, ep 2 × HSDP, ep 2 × PP 2, cp 2, ep 2 × cp 2, ep 4 × cp 2 × FSDP 2 reproduce one process"

# --- A capacity that drops token copies, and a shared expert: the same at ep 2; drops counted.
cs=(--set model.capacity_factor=0.75 --set model.shared_ff=16)
run_one single_cs --set train.threads=2 --set train.batch_size=8 "${cs[@]}"
ranks ep2_cs 2 --set train.batch_size=4 --set parallel.dp_shard=2 --set parallel.ep=2 "${cs[@]}"
ranks tp2_cs 2 --set train.batch_size=8 --set parallel.tp=2 "${cs[@]}" --set optim.grad_clip=0.5
ranks ep2_tp2_cs 4 --set train.batch_size=4 --set parallel.dp_shard=2 --set parallel.ep=2 --set parallel.tp=2 "${cs[@]}"
run_one single_cs_clip --set train.threads=2 --set train.batch_size=8 "${cs[@]}" --set optim.grad_clip=0.5
for r in ep2_cs ep2_tp2_cs; do same_weights single_cs $r 1e-5; done
same_weights single_cs_clip tp2_cs 1e-5
"$py" - "$work/single_cs/metrics.jsonl" "$work/ep2_cs/metrics.jsonl" <<'PY' || fail "the routing's records differ or lack drops"
import json, sys
def train(path):
    return [r for r in map(json.loads, open(path)) if r["type"] == "train"]
a, b = train(sys.argv[1]), train(sys.argv[2])
assert len(a) == len(b) == 30, (len(a), len(b))
for x, y in zip(a, b):
    assert len(x["tokens_per_expert"]) == 2 and len(x["tokens_per_expert"][0]) == 4, x
    # every token copy is kept or dropped: 32 tokens × top 2 per sample, 8 samples a step (fewer at
    # the epoch's end), in each layer
    copies = [sum(x["tokens_per_expert"][l]) + x["dropped_tokens"][l] for l in range(2)]
    assert copies[0] == copies[1] and copies[0] % 64 == 0 and 0 < copies[0] <= 512, (copies, x)
    assert sum(x["dropped_tokens"]) > 0, x
    assert x["tokens_per_expert"] == y["tokens_per_expert"] and x["dropped_tokens"] == y["dropped_tokens"], (x, y)
    assert abs(x["aux_loss"] - y["aux_loss"]) <= 1e-5 * abs(x["aux_loss"]), (x["aux_loss"], y["aux_loss"])
PY
echo "ok  a capacity and a shared expert: ep 2, tp 2 (each expert's width cut) and ep 2 × tp 2 reproduce one process"
grep -q '"grad_norm"' "$work/tp2_cs/metrics.jsonl" || fail "the clipped run logged no gradient norm"

# --- Checkpoints do not depend on ep: ep 2's step-15 checkpoint goes on at ep 1 and at ep 4.
"$bin/dtrain" train --resume "$(ck "$work/ep2" 15)" --run-dir "$work/cont_one" --set train.threads=2 \
  --set parallel.dp_shard=1 --set parallel.ep=1 --set train.batch_size=8 >"$work/cont_one.out" 2>&1 ||
  { cat "$work/cont_one.out"; fail "one process did not resume ep 2's checkpoint"; }
grep -q "resumed from $(ck "$work/ep2" 15) (step 15," "$work/cont_one.out" || fail "cont_one did not resume at step 15"
same_weights single cont_one 1e-5
ranks cont_ep4 4 --resume "$(ck "$work/ep2" 15)" --set train.batch_size=2 --set parallel.dp_shard=4 --set parallel.ep=4
same_weights single cont_ep4 1e-5
echo "ok  ep 2's checkpoint resumed at ep 1 and ep 4 ends on the uninterrupted trajectory"

# --- What expert parallel cannot take, one line each.
refused() {  # $1 = name, $2 = the error's text, then settings (2 ranks)
  local rc=0
  "$bin/dtrun" --standalone --nproc-per-node 2 "$bin/dtrain" train "${common[@]}" --set train.threads=1 \
    --set parallel.dp_replicate=1 "${@:3}" --run-dir "$work/$1" >"$work/$1.out" 2>&1 || rc=$?
  [ "$rc" -ne 0 ] && grep -q "dtrain: error: $2" "$work/$1.out" || { cat "$work/$1.out"; fail "$1 was not refused"; }
}
refused e1 "parallel.ep = 4 must divide parallel.dp_shard × parallel.cp = 2 × 1" --set parallel.dp_shard=2 --set parallel.ep=4
refused e2 "parallel.ep = 2 does not divide model.experts = 3" --set parallel.dp_shard=2 --set parallel.ep=2 \
  --set model.experts=3
refused e4 "model.capacity_factor takes a sequence's tokens in order, and context parallel splits the sequence" \
  --set parallel.cp=2 --set model.capacity_factor=1
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=32 --set model.layers=1
  --set train.max_steps=2)
refused e3 "parallel.ep = 2: model.kind = transformer has no experts to split" --set parallel.dp_shard=2 \
  --set parallel.ep=2
echo "PASS: expert parallel over FSDP, HSDP and PP reproduces one process; checkpoints across ep; refusals"
