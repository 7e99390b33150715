#!/usr/bin/env bash
# Mixture of experts (model.kind = moe), side by side in one run, on the CPU (train.device = cpu; the
# MoE layer has no GPU kernels yet). The model: configs/moe-gpt2-small.toml (8 SwiGLU experts, top 2)
# at a CPU size by default (--shape cpu: d 256, 8 heads over 4 kv heads, 4 layers, seq 128, experts of
# width 384, batch 16: configs/bench-llama.toml's shape with experts), or the preset's own GPT-2-small
# shape (--shape preset: 12 layers, d 768, T 1024, batch 8; minutes per step on 2 cores, meant for a
# bigger machine). The dense model beside it is the same decoder (model.kind = llama) with one SwiGLU
# of width top_k × expert width: the same active parameters per token but the router's d·E.
#   (a) MoE against dense, bench_train (dtrain's own step, random tokens, SGD): tokens/s and MFU on
#       active parameters, MFU = train_flops_per_token × tokens/s ÷ the measured f32 matmul peak
#       (matmul_peak), train_flops_per_token as summary.json counts it (the blocks'
#       train_flops_per_sample: 6 × the active matmul parameters, the router's d·E and k experts' 3·d·f
#       included, + 12·T·d per layer for attention's scores and weighted sum, + the head's 6·V·d);
#   (b) dtrain against tests/python/moe_reference.py (bench/torch_reference_bench.py: PyTorch 1.13,
#       f32, the same threads, the same model JSON, SGD, a timed loop of zero_grad, forward, backward,
#       step), and the dense pair likewise for context; target ≥ 2× on the MoE model;
#   (c) expert parallel: 2 ranks of 1 thread under dtrun (parallel.dp_shard = 2) at ep 1 and ep 2, the
#       same global batch, on the built-in corpus: step time, the all-to-all's bytes and exchanges per
#       step and the wait it left exposed (summary.json: ep_bytes_per_step, ep_exchanges_per_step,
#       ep_comm_exposed_seconds), and every step's loss against ep 1's;
#   (d) build/bin/moe_experts: the experts' grouped products (one product per expert over its routed
#       tokens, as MoeLayer runs them) against the dense SwiGLU's products over the same tokens (the same
#       FLOPs), GFLOP/s of each and their ratio (target ≥ 70%); and the MoE layer whole against the
#       dense feed-forward whole.
# Step times: each run's mean over its timed steps (--stat min: its fastest step, for (a) and (b); less
# sensitive to a busy machine), the best of --rounds rounds (the runs of (a) and (b) alternate within a
# round). Run it on an idle machine.
# usage: bench/moe.sh [--bin DIR] [--shape cpu|preset] [--preset FILE] [--batch B] [--steps N] [--warmup N]
#                     [--rounds N] [--threads N] [--stat mean|min] [--parts abcd] [--set key=value ...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/../build/bin shape=cpu preset=$here/../configs/moe-gpt2-small.toml batch="" steps=6 warmup=2
rounds=2 threads=2 stat=mean parts=abcd sets=()
source "$here/lib.sh"
bench_options "--shape shape --preset preset --batch batch --steps steps --warmup warmup --rounds rounds
  --threads threads --stat stat --parts parts --set sets+" "$@"
case $shape in cpu | preset) ;; *) echo "--shape $shape: use cpu or preset" >&2; exit 2 ;; esac
case $stat in mean | min) ;; *) echo "--stat $stat: use mean or min" >&2; exit 2 ;; esac
bench_work
bench_data
# The corpus's vocabulary sizes every model here (bench_train's random tokens too).
vocab=$(wc -l <"$work/data/vocab.txt")
# The presets: the MoE one at the chosen shape, and its dense twin (kind llama, ff = top_k × expert width).
/usr/bin/python3 - "$preset" "$shape" "$work" "$batch" <<'PY'
import sys, tomllib
src, shape, work, batch = sys.argv[1:5]
cfg = tomllib.load(open(src, "rb"))
m, t = cfg.setdefault("model", {}), cfg.setdefault("train", {})
if m.get("kind") != "moe":
    sys.exit(f"{src}: model.kind is {m.get('kind')!r}, not \"moe\"")
if shape == "cpu":
    m.update(dim=256, heads=8, kv_heads=4, layers=4, seq_len=128, expert_ff=384)
    t["batch_size"] = 16
if batch:
    t["batch_size"] = int(batch)
cfg.pop("data", None)  # the corpus is the script's (data.dir set below)
k = m.get("top_k", 2)
ff = m.get("ff_dim", 0) or (8 * m["dim"] // 3 + 255) // 256 * 256
width = m.get("expert_ff", 0) or max(16, ff // k // 16 * 16)
moe_only = ("experts", "top_k", "expert_ff", "moe_every", "router", "norm_topk", "aux_loss_coef")
dense = {"model": {a: b for a, b in m.items() if a not in moe_only}, "train": t, "optim": cfg.get("optim", {})}
dense["model"].update(kind="llama", ff_dim=k * width)
if m.get("moe_every", 1) != 1:
    sys.exit("moe_every != 1: the dense twin would not have the same active parameters; use a preset with moe_every = 1")
def toml(c):
    val = lambda v: ("true" if v else "false") if isinstance(v, bool) else f'"{v}"' if isinstance(v, str) else str(v)
    return "".join(f"[{s}]\n" + "".join(f"{a} = {val(b)}\n" for a, b in sec.items()) for s, sec in c.items())
open(f"{work}/moe.toml", "w").write(toml(cfg))
open(f"{work}/dense.toml", "w").write(toml(dense))
PY
read -r B T d E k f < <(/usr/bin/python3 -c "
import tomllib; c = tomllib.load(open('$work/moe.toml', 'rb')); m = c['model']
ff = m.get('ff_dim', 0) or (8 * m['dim'] // 3 + 255) // 256 * 256
print(c['train']['batch_size'], m['seq_len'], m['dim'], m.get('experts', 8), m.get('top_k', 2),
      m.get('expert_ff', 0) or max(16, ff // m.get('top_k', 2) // 16 * 16))")
# SGD without decay or warm-up on both sides: the same update torch.optim.SGD makes.
opt=(--set optim.name=sgd --set optim.weight_decay=0 --set optim.warmup_steps=0 --set optim.schedule=constant
  --set train.device=cpu "${sets[@]}")
has() { [[ $parts == *$1* ]]; }
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; $(lscpu | sed -n 's/^Model name: *//p')" \
  "(cpu family $(lscpu | sed -n 's/^CPU family: *//p'), model $(lscpu | sed -n 's/^Model: *//p'))"
if has a || has b; then
  "$bin/matmul_peak" --threads "$threads" >"$work/peak1.json"
  for r in $(seq "$rounds"); do
    for m in moe dense; do
      "$bin/bench_train" --config "$work/$m.toml" --vocab "$vocab" --threads "$threads" --precision f32 \
        --steps "$steps" --warmup "$warmup" "${opt[@]}" >"$work/dtrain_${m}_r$r.json" 2>"$work/err" ||
        { cat "$work/err"; exit 1; }
      if has b; then
        /usr/bin/python3 "$here/torch_reference_bench.py" --config-json "$(/usr/bin/python3 -c \
          'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["model"]))' "$work/dtrain_${m}_r$r.json")" \
          --batch "$B" --steps "$steps" --warmup "$warmup" --threads "$threads" --optimizer sgd --lr 0.001 \
          >"$work/torch_${m}_r$r.json" 2>"$work/err" || { cat "$work/err"; exit 1; }
      fi
    done
  done
  "$bin/matmul_peak" --threads "$threads" >"$work/peak2.json"
fi
if has c; then
  # The corpus's validation and test splits may be shorter than a window of a long context.
  cp "$work/data/train.bin" "$work/data/valid.bin" && cp "$work/data/train.bin" "$work/data/test.bin"
  (( B % 2 == 0 )) || { echo "(c) needs an even batch (2 ranks): --batch" >&2; exit 2; }
  for r in $(seq "$rounds"); do
    for ep in 1 2; do
      OMP_NUM_THREADS=1 "$bin/dtrun" --standalone --nproc-per-node 2 --no-tag "$bin/dtrain" train \
        --config "$work/moe.toml" --set data.dir="$work/data" --set data.stride="$T" "${bench_quiet[@]}" \
        --set train.log_every=1 --set train.checkpoint_every=0 --set train.max_steps=$((steps + 1)) \
        --set train.batch_size=$((B / 2)) --set train.threads=1 --set parallel.dp_shard=2 --set parallel.ep=$ep \
        "${opt[@]}" --run-dir "$work/ep${ep}_r$r" >"$work/ep${ep}_r$r.out" 2>&1 || { cat "$work/ep${ep}_r$r.out"; exit 1; }
    done
  done
fi
if has d; then
  "$bin/moe_experts" --rows $((B * T)) --seq "$T" --dim "$d" --experts "$E" --top-k "$k" --expert-ff "$f" \
    --threads "$threads" --reps $((steps * 2)) >"$work/experts.json"
fi
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$work" "$rounds" "$parts" "$threads" "$stat" <<'PY'
import json, os, sys
work, rounds, parts, threads, stat = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
load = lambda p: json.load(open(p))
lines = lambda p: [json.loads(l) for l in open(p) if l.strip()]
ok = True  # targets are reported; only a loss that differs between ep 1 and ep 2 fails the script
def verdict(good): return "PASS" if good else "FAIL"
if "a" in parts or "b" in parts:
    peak = max(load(f"{work}/peak{i}.json")["f32_gflops"] for i in (1, 2))
    def best(side, m):  # the round with the least mean step
        runs = [load(f"{work}/{side}_{m}_r{r}.json") for r in range(1, rounds + 1)]
        key = "min_step_ms" if stat == "min" else "mean_step_ms" if side == "dtrain" else "step_ms"
        b = min(runs, key=lambda x: x[key])
        return dict(b, ms=b[key], tps=b["batch"] * b["seq_len"] / (b[key] / 1e3))
    d = {m: best("dtrain", m) for m in ("moe", "dense")}
    mm = d["moe"]["model"]
    E, k, dim, L, T = mm["experts"], mm["top_k"], mm["dim"], mm["layers"], mm["seq_len"]
    print(f"\nmodel: {L} layers, d {dim}, {mm['heads']}/{mm['kv_heads'] or mm['heads']} heads, seq {T}, "
          f"vocabulary {mm['vocab_size']}, batch {d['moe']['batch']}; MoE: {E} experts of width "
          f"{d['dense']['model']['ff_dim'] // k}, top {k}; dense: SwiGLU {d['dense']['model']['ff_dim']}; "
          f"f32, {threads} threads, SGD")
    print(f"f32 matmul peak (matmul_peak, best of start and end): {peak:.0f} GFLOP/s; step time: each run's "
          f"{'fastest' if stat == 'min' else 'mean'} timed step, the best of {rounds} rounds")
    print("train_flops_per_token = 6·N_active + 12·L·T·d: N_active the matmul parameters a token runs "
          "(per layer q, k, v, o, the router d·E and k experts' 3·d·f, or the dense 3·d·F; the head V·d), "
          "the causal mask not discounted")
    print(f"\n(a) MoE against dense, dtrain (bench_train)")
    print(f"{'model':<6} {'params':>11} {'FLOP/token':>11} {'ms/step':>8} {'tokens/s':>9} {'MFU':>6} {'peak MiB':>8}")
    for m in ("moe", "dense"):
        x = d[m]
        mfu = x["train_flops_per_token"] * x["tps"] / (peak * 1e9)
        print(f"{m:<6} {x['params']:>11,} {x['train_flops_per_token'] / 1e6:>10.1f}M {x['ms']:8.1f} {x['tps']:9.0f} "
              f"{mfu:6.1%} {x['peak_rss_mb']:8.0f}")
    print(f"MoE / dense: tokens/s {d['moe']['tps'] / d['dense']['tps']:.2f}x, FLOP/token "
          f"{d['moe']['train_flops_per_token'] / d['dense']['train_flops_per_token']:.3f}x, parameters "
          f"{d['moe']['params'] / d['dense']['params']:.2f}x")
    if "b" in parts:
        t = {m: best("torch", m) for m in ("moe", "dense")}
        print(f"\n(b) dtrain against PyTorch {t['moe']['torch']} (f32, {threads} threads, SGD; "
              f"torch BLAS: {', '.join(os.path.basename(b) for b in t['moe']['blas']) or '?'})")
        print(f"{'model':<6} {'dtrain ms':>9} {'torch ms':>9} {'dtrain tok/s':>12} {'torch tok/s':>11} {'ratio':>6} "
              f"{'torch MFU':>9} {'dtrain MiB':>10} {'torch MiB':>9}  target")
        for m in ("moe", "dense"):
            x, y = d[m], t[m]
            assert x["params"] == y["params"], f"{m}: dtrain has {x['params']} parameters, torch {y['params']}"
            ratio = x["tps"] / y["tps"]
            mfu = x["train_flops_per_token"] * y["tps"] / (peak * 1e9)
            goal = f"≥ 2x: {verdict(ratio >= 2)}" if m == "moe" else ""
            print(f"{m:<6} {x['ms']:9.1f} {y['ms']:9.1f} {x['tps']:12.0f} {y['tps']:11.0f} {ratio:5.2f}x {mfu:9.1%} "
                  f"{x['peak_rss_mb']:10.0f} {y['peak_rss_mb']:9.0f}  {goal}")
if "c" in parts:
    def summ(ep, r): return load(f"{work}/ep{ep}_r{r}/summary.json")
    def losses(ep, r): return [x["loss"] for x in lines(f"{work}/ep{ep}_r{r}/metrics.jsonl") if x["type"] == "train"]
    step = {ep: min(summ(ep, r)["step_time"]["mean_s"] for r in range(1, rounds + 1)) * 1e3 for ep in (1, 2)}
    err = max(abs(a - b) / abs(b) for r in range(1, rounds + 1) for a, b in zip(losses(2, r), losses(1, r)))
    s2 = summ(2, 1)
    n = s2["steps"]
    cfg = load(f"{work}/ep1_r1/config.json")
    print(f"\n(c) expert parallel: 2 ranks × 1 thread (dtrun, parallel.dp_shard = 2), global batch "
          f"{2 * cfg['train']['batch_size']}, the built-in corpus")
    print(f"{'run':<5} {'ms/step':>8} {'ratio':>6} {'a2a MB/step':>11} {'exchanges':>9} {'exposed ms/step':>15} "
          f"{'exposed share':>13}")
    print(f"{'ep 1':<5} {step[1]:8.1f} {1.0:5.2f}x {'-':>11} {'-':>9} {'-':>15} {'-':>13}")
    exp = s2["ep_comm_exposed_seconds"] / n * 1e3
    print(f"{'ep 2':<5} {step[2]:8.1f} {step[2] / step[1]:5.2f}x {s2['ep_bytes_per_step'] / 1e6:11.2f} "
          f"{s2['ep_exchanges_per_step']:9.0f} {exp:15.1f} {exp / step[2]:13.0%}")
    print(f"ms/step: summary.json's step_time mean (steps after the first), best of {rounds}; a2a: what rank 0 sent per "
          f"step (tokens to their experts' ranks and back, forward and backward); exposed: rank 0's waits for the "
          f"all-to-alls, per step over all {n} steps")
    good = err <= 1e-5
    ok &= good
    print(f"loss: every step at ep 2 against ep 1, worst relative difference {err:.1e} ({verdict(good)}: within 1e-5)")
if "d" in parts:
    x = load(f"{work}/experts.json")
    print(f"\n(d) expert products (moe_experts): {x['rows']} tokens, d {x['dim']}, {x['experts']} experts of width "
          f"{x['expert_ff']}, top {x['top_k']}, against one SwiGLU of width {x['dense_ff']}; forward + backward, "
          f"{x['product_flops'] / 1e9:.2f} GFLOP each, median of {x['reps']}")
    print(f"rows per expert (the fixed routing): {x['rows_per_expert']}")
    print(f"{'':<40} {'ms':>8} {'GFLOP/s':>8} {'of dense':>8}")
    for name, ms, gf in (("grouped products, a new routing", x["grouped_new_ms"], x["grouped_new_gflops"]),
                         ("grouped products, a fixed routing", x["grouped_fixed_ms"], x["grouped_fixed_gflops"]),
                         ("dense products", x["dense_products_ms"], x["dense_gflops"])):
        print(f"{name:<40} {ms:8.2f} {gf:8.1f} {gf / x['dense_gflops']:8.0%}")
    print(f"{'MoE layer whole, a new routing':<40} {x['moe_layer_ms']:8.2f} {'':>8} {x['dense_ffn_ms'] / x['moe_layer_ms']:8.0%}")
    print(f"{'MoE layer whole, a fixed routing':<40} {x['moe_layer_fixed_ms']:8.2f} {'':>8} "
          f"{x['dense_ffn_ms'] / x['moe_layer_fixed_ms']:8.0%}")
    print(f"{'dense feed-forward whole':<40} {x['dense_ffn_ms']:8.2f}")
    print(f"grouped / dense matmul throughput (target ≥ 70%): a new routing {x['new_over_dense']:.0%} "
          f"({verdict(x['new_over_dense'] >= 0.7)}), a fixed routing {x['fixed_over_dense']:.0%} "
          f"({verdict(x['fixed_over_dense'] >= 0.7)})")
    print("a new routing: new rows per expert each rep, as a training step brings them (each new row count costs\n"
          "the matmul a new oneDNN primitive); a fixed one: the same counts every rep (every primitive cached). whole:\n"
          "router, top-k, gather, products, SwiGLU, weighted sum, balance loss; of dense: dense's time / this one's")
sys.exit(0 if ok else 1)
PY
