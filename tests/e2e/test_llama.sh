#!/usr/bin/env bash
# The Llama-style decoder (model.kind = llama) end to end. Parity: the same weights and batches
# through tests/python/llama_reference.py (Hugging Face's computation, by Hugging Face's tensor
# names) give logits and every gradient within 1e-5 relative, and 10 AdamW steps' losses, for
# grouped-query attention untied and for multi-head attention tied with θ = 500000. Layouts: DDP 2,
# FSDP 2, HSDP 2 × 2, TP 2 with and without sequence parallel (kv heads split), PP 2 under every
# schedule, and PP 2 × TP 2 × FSDP 2 each end 30 steps (dropout on) with the weights of one process
# with the same global batch under SGD-momentum (relative 1e-5). A tp that does not divide the kv
# heads is one line; the checkpoint generates text; its export holds Hugging Face's names.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to compare weights"
config="$work/llama.toml"
printf '[train]\nseed = 1\n' >"$config"
model=(--config "$config" --set model.kind=llama --set data.dir="$work/data" --set model.dim=64 --set model.heads=4
  --set model.kv_heads=2 --set model.layers=4 --set model.ff_dim=96 --set model.seq_len=32 --set data.stride=32)
common=("${model[@]}" --set train.max_steps=30 --set train.log_every=1 --set train.progress=false
  --set train.eval_max_batches=2 --set model.dropout=0.1 --set optim.name=sgd --set optim.momentum=0.9
  --set train.lr=0.05 --set optim.warmup_steps=0 --set train.epochs=0)

# 1. parity with the PyTorch reference
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  "$bin/dtrain" debug dump "${model[@]}" --set train.batch_size=4 --out "$work/gqa" --steps 10 >/dev/null
  /usr/bin/python3 "$src/tests/python/parity.py" "$work/gqa" --rtol 1e-5 || fail "llama (GQA, untied) parity"
  "$bin/dtrain" debug dump "${model[@]}" --set train.batch_size=4 --set model.kv_heads=0 --set model.tied=true \
    --set model.rope_theta=500000 --out "$work/mha" --steps 10 >/dev/null
  /usr/bin/python3 "$src/tests/python/parity.py" "$work/mha" --rtol 1e-5 || fail "llama (MHA, tied) parity"
else
  echo "note: /usr/bin/python3 has no torch: the parity part is skipped (install python3-torch)"
fi

# 2. every layout reproduces one process
one() { run_one "$1" --set train.threads=2 "${@:2}"; }
ranks() { run_ranks "$1" "$2" --set train.threads=1 "${@:3}"; }
one single --set train.batch_size=8
one single16 --set train.batch_size=16
ranks ddp2 2 --set train.batch_size=8 --set parallel.dp=2
ranks fsdp2 2 --set train.batch_size=8 --set parallel.dp_shard=2
ranks hsdp 4 --set train.batch_size=4 --set parallel.dp_replicate=2 --set parallel.dp_shard=2
ranks tp2 2 --set train.batch_size=8 --set parallel.tp=2
ranks tp2_sp 2 --set train.batch_size=8 --set parallel.tp=2 --set parallel.tp_sequence=true
for s in gpipe 1f1b zb-h1; do ranks "pp2_$s" 2 --set train.batch_size=8 --set parallel.pp=2 --set parallel.pp_schedule=$s; done
for s in interleaved-1f1b zb-v; do
  ranks "pp2_$s" 2 --set train.batch_size=8 --set parallel.pp=2 --set parallel.pp_schedule=$s --set parallel.pp_virtual=2
done
ranks pp2_tp2_fsdp2 8 --set train.batch_size=8 --set parallel.pp=2 --set parallel.tp=2 --set parallel.dp_shard=2 \
  --set train.batch_size=4
for r in ddp2 fsdp2 hsdp; do same_weights single16 $r 1e-5; done
for r in tp2 tp2_sp pp2_gpipe pp2_1f1b pp2_zb-h1 pp2_interleaved-1f1b pp2_zb-v; do same_weights single $r 1e-5; done
same_weights single pp2_tp2_fsdp2 1e-5

# 3. a tp the kv heads do not divide, generation, Hugging Face's names
rc=0
"$bin/dtrun" --standalone --nproc-per-node 2 "$bin/dtrain" train "${common[@]}" --set model.kv_heads=1 \
  --set parallel.tp=2 --set train.threads=1 --run-dir "$work/bad" >"$work/bad.out" 2>&1 || rc=$?
[ "$rc" -ne 0 ] || fail "tp 2 with one kv head was accepted"
[ "$(grep -c "dtrain: error: parallel.tp = 2 does not divide model.kv_heads = 1: " "$work/bad.out")" -eq 1 ] ||
  { cat "$work/bad.out"; fail "tp 2 with one kv head was not named once"; }
"$bin/dtrain" generate --checkpoint "$work/single/model_final" --prompt "the" --tokens 5 >"$work/gen.out" 2>&1 ||
  { cat "$work/gen.out"; fail "generate from a llama checkpoint failed"; }
[ "$(wc -w <"$work/gen.out")" -ge 6 ] || fail "generate wrote too little: $(cat "$work/gen.out")"
"$bin/dtrain" ckpt export "$work/single/model_final" --out "$work/hf/model.safetensors" >/dev/null
"$py" - "$work/hf/model.safetensors" <<'PYEOF' || fail "the export does not hold Hugging Face's Llama names"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
names = set(json.loads(raw[8:8 + n])) - {"__metadata__"}
want = {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"}
for i in range(4):
    p = f"model.layers.{i}."
    want |= {p + "input_layernorm.weight", p + "post_attention_layernorm.weight"}
    want |= {p + f"self_attn.{x}_proj.weight" for x in "qkvo"}
    want |= {p + f"mlp.{x}_proj.weight" for x in ("gate", "up", "down")}
sys.exit(0 if names == want else f"names: missing {sorted(want - names)}, unexpected {sorted(names - want)}")
PYEOF
echo "PASS: llama parity (GQA untied, MHA tied θ 5e5), DDP, FSDP, HSDP, TP ± SP, PP × 5 schedules, PP × TP × FSDP, one-line kv-heads error, generate, HF names"
