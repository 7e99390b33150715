#!/usr/bin/env bash
# compare-builds.sh — proves that two builds of dtrain compute the same numbers, byte for byte.
#
# For each case (two Transformer language models × six layouts; DDP with a gradient clip; a
# Llama-style model on one process, under TP with sequence parallel, under ZB-V with selective
# recompute and under CP; the post-norm and Llama models on one process at 2 threads and 32
# positions; a mixture of experts under EP; the CNN on one process and under DDP) it
# trains with the OLD build's programs and with the NEW build's, from the same data set (made once by the OLD build) and the same config, in separate
# run dirs; exports the final weights (model_final) and the last checkpoint (weights + optimizer
# state) with each build's own `dtrain ckpt export`, and compares the files with cmp. It also
# compares the loss-like fields of metrics.jsonl and summary.json (timings are left out).
#
# Usage: scripts/compare-builds.sh OLD_BIN_DIR NEW_BIN_DIR [WORK_DIR]
#   OLD_BIN_DIR, NEW_BIN_DIR  folders holding each build's dtrain and dtrun (e.g. build/bin)
#   WORK_DIR                  where data, configs, run dirs and exports go (created; must be empty
#                             if it exists; kept). Without it: a temporary folder, removed at the
#                             end unless KEEP=1.
# Environment:
#   KEEP=1              keep the temporary folder (its path is printed)
#   CASES=REGEX         run only the cases whose name matches (grep -E), e.g. CASES='pp2|tp2'
#   STEPS=N             optimizer steps per run (default 30)
#   OLD_EXTRA_SET, NEW_EXTRA_SET
#                       extra `--set key=value` settings for one side only, whitespace separated
#                       (e.g. NEW_EXTRA_SET="train.seed=2" to see that a difference is caught)
#   ADDED_MODEL_KEYS="kind"
#                       model config keys the NEW build records and the OLD one did not: an
#                       export whose tensor data is byte-identical and whose header differs only
#                       by them in the recorded model config passes, with a note (default: kind,
#                       which the model-interface change added; "" makes any header change a FAIL)
# Exit status: 0 every case identical; 1 a case differs or a run/export failed; 2 bad usage or setup.
set -euo pipefail

usage() { sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; }

if [[ $# -ge 1 && ( $1 == -h || $1 == --help ) ]]; then usage; exit 0; fi
if [[ $# -lt 2 || $# -gt 3 ]]; then
  usage >&2
  exit 2
fi
die() { echo "compare-builds: $*" >&2; exit 2; }

for tool in jq cmp od; do
  command -v "$tool" >/dev/null || die "needs '$tool' (apt-get install ${tool/od/coreutils})"
done

bin_dir() {  # $1 side label, $2 folder: prints the absolute folder after checking its programs
  [[ -d $2 ]] || die "$1 bin dir '$2' is not a folder"
  local d
  d=$(cd "$2" && pwd)
  for p in dtrain dtrun; do
    [[ -x $d/$p ]] || die "$1 bin dir '$d' has no executable '$p'"
  done
  echo "$d"
}
OLD_BIN=$(bin_dir OLD "$1")
NEW_BIN=$(bin_dir NEW "$2")

STEPS=${STEPS:-30}
[[ $STEPS =~ ^[1-9][0-9]*$ ]] || die "STEPS must be a positive integer, not '$STEPS'"
CASES_RE=${CASES:-}
read -r -a OLD_EXTRA <<<"${OLD_EXTRA_SET:-}"
read -r -a NEW_EXTRA <<<"${NEW_EXTRA_SET:-}"

if [[ $# -eq 3 ]]; then
  mkdir -p "$3"
  WORK=$(cd "$3" && pwd)
  [[ -z $(ls -A "$WORK") ]] || die "WORK_DIR '$WORK' is not empty"
  REMOVE_WORK=0
else
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/compare-builds.XXXXXX")
  if [[ ${KEEP:-0} == 1 ]]; then REMOVE_WORK=0; else REMOVE_WORK=1; fi
fi
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  if [[ $REMOVE_WORK == 1 ]]; then
    rm -rf -- "$WORK"
  else
    echo "compare-builds: work folder kept: $WORK"
  fi
}
trap cleanup EXIT
trap 'echo "compare-builds: interrupted" >&2; exit 130' INT TERM

fmt_time() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

echo "compare-builds: OLD $OLD_BIN"
echo "compare-builds: NEW $NEW_BIN"
[[ ${#OLD_EXTRA[@]} -eq 0 ]] || echo "compare-builds: OLD extra settings: ${OLD_EXTRA[*]}"
[[ ${#NEW_EXTRA[@]} -eq 0 ]] || echo "compare-builds: NEW extra settings: ${NEW_EXTRA[*]}"
echo "compare-builds: work folder $WORK, $STEPS steps per run"

T_START=$SECONDS

# ---- the data set, made once by the OLD build, read by both ----
if ! "$OLD_BIN/dtrain" data builtin --out "$WORK/data" >"$WORK/data.log" 2>&1; then
  tail -n 20 "$WORK/data.log" >&2
  die "OLD 'dtrain data builtin' failed (log above)"
fi

# ---- the two models ----
# Small enough for seconds per run on 2 cores; 4 layers so that pipeline stages have units to
# share; dropout on, so the masks are compared too; one thread per rank (no thread-count effects),
# but for two one-process cases at 2 threads and 32 positions (the course's length), where kernels'
# vector loops and thread splits take other paths (a softmax change once passed every case at 16
# positions and one thread, and changed the course preset's f32 numbers).
common_config() {
  cat <<EOF
[data]
dir = "$WORK/data"
stride = 1

[train]
epochs = 1
max_steps = $STEPS
batch_size = 8
seed = 1
lr = 0.002
threads = 1
log_every = 1
progress = false
eval_max_batches = 8
EOF
}
{
  cat <<'EOF'
# the course's model, small: post-norm, ReLU, sinusoidal positions, untied head
[model]
seq_len = 16
dim = 32
heads = 4
layers = 4
ff_dim = 64
activation = "relu"
norm = "post"
positions = "sinusoidal"
tied = false
dropout = 0.1

EOF
  common_config
} >"$WORK/post.toml"
{
  cat <<'EOF'
# GPT-2-like: pre-norm, tied embedding and head, GELU, learned positions
[model]
seq_len = 16
dim = 32
heads = 4
layers = 4
ff_dim = 64
activation = "gelu"
norm = "pre"
positions = "learned"
tied = true
dropout = 0.1

EOF
  common_config
} >"$WORK/pre.toml"
{
  cat <<'EOF'
# Llama-style: RMSNorm, rotary positions, grouped-query attention, SwiGLU, no biases
[model]
kind = "llama"
seq_len = 16
dim = 32
heads = 4
kv_heads = 2
layers = 4
ff_dim = 64
tied = false
dropout = 0.1

EOF
  common_config
} >"$WORK/llama.toml"
{
  cat <<'EOF'
# a mixture of experts: the Llama-style decoder with 4 SwiGLU experts per block, top 2
[model]
kind = "moe"
seq_len = 16
dim = 32
heads = 4
kv_heads = 2
layers = 2
experts = 4
top_k = 2
expert_ff = 32
tied = false
dropout = 0.1

EOF
  common_config
} >"$WORK/moe.toml"

# The course's CNN, small: seeded 28×28 images (a bright band per class, noise elsewhere), made by the
# OLD build's `dtrain data prepare` like the text, read by both; its own [data] and [train].
"${PYTHON:-python3}" "$(dirname "$0")/../tests/python/seeded_images.py" "$WORK/idx" 320 64 ||
  die "could not write the image files (tests/python/seeded_images.py)"
if ! "$OLD_BIN/dtrain" data prepare --format idx --input "$WORK/idx" --out "$WORK/images" --valid-count 32 \
      >"$WORK/images.log" 2>&1; then
  tail -n 20 "$WORK/images.log" >&2
  die "OLD 'dtrain data prepare --format idx' failed (log above)"
fi
cat >"$WORK/cnn.toml" <<EOF
# the course's CNN, narrower: conv 1→16 3×3, ReLU, conv 16→32, ReLU, max-pool 2, dropout, linear, ReLU, dropout
[model]
kind = "cnn"
channels = "16,32"
kernel = "3"
pool = 2
hidden = "32"
conv_dropout = 0.25
dropout = 0.5

[data]
dir = "$WORK/images"

[train]
epochs = 1
max_steps = $STEPS
batch_size = 8
seed = 1
lr = 0.001
threads = 1
log_every = 1
progress = false
eval_max_batches = 4
EOF

# ---- the cases: name | config | ranks | settings ----
# A tied head on another pipeline rank than its embedding is refused by design (1F1B puts them on
# ranks 0 and 1), so that case trains the pre-norm model untied. ZB-V's V puts both on rank 0.
# Units: 0 the embedding, 1..4 the blocks, 5 the head. Balanced by cost, 1F1B would put every block
# on rank 0 and the head alone on rank 1 (the vocabulary dominates this small model), so 1F1B is
# cut at unit 3 (embed + 2 blocks | 2 blocks + head); ZB-V keeps the cost-balanced cut.
ALL_CASES=(
  "post-1proc|post|1|"
  "post-1proc-2threads-T32|post|1|train.threads=2 model.seq_len=32"
  "post-ddp2|post|2|parallel.dp=2"
  "post-fsdp2|post|2|parallel.dp_shard=2"
  "post-tp2-sp|post|2|parallel.tp=2 parallel.tp_sequence=true"
  "post-pp2-1f1b|post|2|parallel.pp=2 parallel.pp_schedule=1f1b parallel.pp_split=3"
  "post-pp2-zbv|post|2|parallel.pp=2 parallel.pp_schedule=zb-v parallel.pp_virtual=2"
  "pre-tied-1proc|pre|1|"
  "pre-tied-ddp2|pre|2|parallel.dp=2"
  "pre-tied-fsdp2|pre|2|parallel.dp_shard=2"
  "pre-tied-tp2-sp|pre|2|parallel.tp=2 parallel.tp_sequence=true"
  "pre-UNTIED-pp2-1f1b|pre|2|model.tied=false parallel.pp=2 parallel.pp_schedule=1f1b parallel.pp_split=3"
  "pre-tied-pp2-zbv|pre|2|parallel.pp=2 parallel.pp_schedule=zb-v parallel.pp_virtual=2"
  "pre-tied-ddp2-clip|pre|2|parallel.dp=2 optim.grad_clip=0.5"
  "llama-1proc|llama|1|"
  "llama-1proc-2threads-T32|llama|1|train.threads=2 model.seq_len=32"
  "llama-tp2-sp|llama|2|parallel.tp=2 parallel.tp_sequence=true"
  "llama-pp2-zbv-selective|llama|2|parallel.pp=2 parallel.pp_schedule=zb-v parallel.pp_virtual=2 train.recompute=selective"
  "llama-cp2|llama|2|parallel.cp=2"
  "moe-ep2|moe|2|parallel.dp_shard=2 parallel.ep=2"
  "cnn-1proc|cnn|1|"
  "cnn-ddp2|cnn|2|parallel.dp=2"
)
CASE_LIST=()
for c in "${ALL_CASES[@]}"; do
  name=${c%%|*}
  if [[ -z $CASES_RE ]] || grep -qE -- "$CASES_RE" <<<"$name"; then CASE_LIST+=("$c"); fi
done
[[ ${#CASE_LIST[@]} -gt 0 ]] || die "CASES='$CASES_RE' matches no case"

# ---- helpers ----
# loss-like fields only: no timings (tokens_per_s, *_seconds), no checkpoint records
LOSS_FILTER='select(.type == "train" or .type == "epoch" or .type == "val" or .type == "test")
  | {type, step, epoch, loss, ppl, lr, grad_norm, train_loss, val_loss}
  | with_entries(select(.value != null))'
SUMMARY_FILTER='{summary: {test_loss, test_ppl, best_val_loss, steps, train_tokens, parameters}}'

# Trains one side of a case and exports its weights. $1 side (old|new), $2 bin dir, $3 case dir,
# $4 config, $5 ranks, $6 settings; then the side's extra settings. Returns non-zero on failure,
# with the reason in $3/$1.error.
run_side() {
  local side=$1 bin=$2 dir=$3 config=$4 nproc=$5 settings=$6
  shift 6
  local rd=$dir/$side.run log=$dir/$side.log
  local -a sets=() cmd
  local s
  for s in $settings "$@"; do sets+=(--set "$s"); done
  cmd=("$bin/dtrain" train --config "$config" --run-dir "$rd" "${sets[@]}")
  if [[ $nproc -gt 1 ]]; then
    cmd=("$bin/dtrun" --standalone --nproc-per-node "$nproc" "${cmd[@]}")
  fi
  printf '%q ' "${cmd[@]}" >"$dir/$side.cmd"
  echo >>"$dir/$side.cmd"
  local rc=0
  "${cmd[@]}" >"$log" 2>&1 || rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "$side training failed (exit status $rc)" >"$dir/$side.error"
    return 1
  fi
  # model_final is full (model.safetensors) or, under pipeline parallel, sharded: both have index.json
  if [[ ! -f $rd/model_final/index.json ]]; then
    echo "$side run wrote no model_final/index.json" >"$dir/$side.error"
    return 1
  fi
  local last
  last=$(find "$rd/checkpoints" -mindepth 1 -maxdepth 1 -type d -name 'step_*' 2>/dev/null |
           sed 's/.*step_//' | grep -E '^[0-9]+$' | sort -n | tail -n 1 || true)
  if [[ -z $last ]]; then
    echo "$side run wrote no checkpoints/step_N" >"$dir/$side.error"
    return 1
  fi
  echo "$last" >"$dir/$side.last_step"
  if ! "$bin/dtrain" ckpt export "$rd/model_final" --out "$dir/$side.final.safetensors" >>"$log" 2>&1; then
    echo "$side export of model_final failed" >"$dir/$side.error"
    return 1
  fi
  if ! "$bin/dtrain" ckpt export "$rd/checkpoints/step_$last" --optimizer \
         --out "$dir/$side.ckpt.safetensors" >>"$log" 2>&1; then
    echo "$side export of checkpoints/step_$last failed" >"$dir/$side.error"
    return 1
  fi
  if ! { jq -c "$LOSS_FILTER" "$rd/metrics.jsonl" && jq -c "$SUMMARY_FILTER" "$rd/summary.json"; } \
         >"$dir/$side.losses.jsonl" 2>>"$log"; then
    echo "$side: metrics.jsonl or summary.json unreadable" >"$dir/$side.error"
    return 1
  fi
  if ! grep -q '"type":"train"' "$dir/$side.losses.jsonl"; then
    echo "$side: no train losses in metrics.jsonl" >"$dir/$side.error"
    return 1
  fi
}

header_len() { od -An -t u8 -N 8 "$1" | tr -d ' '; }  # a safetensors file's JSON header length

# Which tensor of a safetensors file holds byte $2 (1-based, as cmp counts)?
tensor_at() {
  local file=$1 byte=$2 n pos
  n=$(header_len "$file")
  pos=$((byte - 1 - 8 - n))
  if [[ $pos -lt 0 ]]; then echo "the header"; return; fi
  head -c $((8 + n)) "$file" | tail -c "$n" |
    jq -r --argjson p "$pos" 'to_entries[] | select(.key != "__metadata__")
      | select(.value.data_offsets[0] <= $p and $p < .value.data_offsets[1])
      | "\(.key), \(.value.dtype) element \(($p - .value.data_offsets[0]) / 4 | floor)"' 2>/dev/null |
    head -n 1
}

# A safetensors file's JSON header, keys sorted, with the model config keys $2 (space separated)
# dropped from the model config recorded in its metadata.
header_without() {
  local file=$1 keys=$2 n
  n=$(header_len "$file")
  head -c $((8 + n)) "$file" | tail -c "$n" |
    jq -S --arg keys "$keys" '.__metadata__["dtrain.model"] |= (fromjson | delpaths([$keys | split(" ")[] | select(length > 0) | [.]]) | tojson)'
}

# Compares old.$1.safetensors with new.$1.safetensors in the current folder; prints nothing when
# identical, else cmp's first differing byte and what holds it. When that byte is in the header
# (tensor names, shapes, offsets, and the model config in __metadata__), the tensor data after the
# headers is compared on its own as well, to tell a metadata change from a change of numbers.
compare_export() {
  local what=$1 a=old.$1.safetensors b=new.$1.safetensors out byte
  if out=$(cmp "$a" "$b" 2>&1); then return 0; fi
  byte=$(sed -nE 's/.* differ: (char|byte) ([0-9]+).*/\2/p' <<<"$out")
  if [[ -z $byte ]]; then
    echo "$what: ${out//$'\n'/ }"  # EOF on one side: one file is a prefix of the other
    return 0
  fi
  local where
  where=$(tensor_at "$a" "$byte")
  if [[ $where != "the header" ]]; then
    echo "$what: first differing byte $byte ($where)"
    return 0
  fi
  local na nb dout dbyte
  na=$(header_len "$a")
  nb=$(header_len "$b")
  if dout=$(cmp <(tail -c +$((9 + na)) "$a") <(tail -c +$((9 + nb)) "$b") 2>&1); then
    if [[ -n ${ADDED_MODEL_KEYS-kind} ]] && ! header_without "$a" "" | jq -e '.__metadata__["dtrain.model"] | fromjson | has("kind")' >/dev/null &&
      cmp -s <(header_without "$a" "") <(header_without "$b" "${ADDED_MODEL_KEYS-kind}"); then
      echo "note: $what: tensor data byte-identical; the header differs only by the model config's added ${ADDED_MODEL_KEYS-kind}"
      return 0
    fi
    echo "$what: first differing byte $byte (in the header: names, shapes or __metadata__); the tensor data is identical"
  else
    dbyte=$(sed -nE 's/.* differ: (char|byte) ([0-9]+).*/\2/p' <<<"$dout")
    if [[ -n $dbyte ]]; then
      echo "$what: first differing byte $byte (in the header); the tensor data differs too, first at byte $((8 + na + dbyte)) of old ($(tensor_at "$a" $((8 + na + dbyte))))"
    else
      echo "$what: first differing byte $byte (in the header); the tensor data differs in length"
    fi
  fi
}

compare_losses() {
  local line
  if cmp -s old.losses.jsonl new.losses.jsonl; then return 0; fi
  line=$(diff old.losses.jsonl new.losses.jsonl | sed -nE '1s/^([0-9]+).*/\1/p')
  echo "losses: first differing record $line: old $(sed -n "${line}p" old.losses.jsonl) new $(sed -n "${line}p" new.losses.jsonl)"
}

# ---- the comparison ----
n_pass=0 n_fail=0 n_error=0
failed=()
printf '%-22s %-6s %7s %7s  %s\n' case result old new details
for c in "${CASE_LIST[@]}"; do
  IFS='|' read -r name model nproc settings <<<"$c"
  dir=$WORK/runs/$name
  mkdir -p "$dir"
  t0=$SECONDS
  ok=1
  run_side old "$OLD_BIN" "$dir" "$WORK/$model.toml" "$nproc" "$settings" ${OLD_EXTRA[@]+"${OLD_EXTRA[@]}"} || ok=0
  t1=$SECONDS
  if [[ $ok == 1 ]]; then
    run_side new "$NEW_BIN" "$dir" "$WORK/$model.toml" "$nproc" "$settings" ${NEW_EXTRA[@]+"${NEW_EXTRA[@]}"} || ok=0
  fi
  t2=$SECONDS
  t_old="$((t1 - t0))s"
  t_new="$((t2 - t1))s"
  if [[ $ok == 0 ]]; then
    side=old
    [[ -f $dir/new.error ]] && side=new
    printf '%-22s %-6s %7s %7s  %s\n' "$name" ERROR "$t_old" "$t_new" "$(cat "$dir/$side.error") (log: runs/$name/$side.log)"
    echo "  --- last lines of the $side log ($(cat "$dir/$side.cmd")) ---"
    tail -n 8 "$dir/$side.log" | sed 's/^/  | /'
    n_error=$((n_error + 1))
    failed+=("$name")
    continue
  fi
  details=()
  pushd "$dir" >/dev/null
  [[ $(cat old.last_step) == $(cat new.last_step) ]] ||
    details+=("last checkpoint: old step_$(cat old.last_step), new step_$(cat new.last_step)")
  notes=()
  d=$(compare_export final) || true; d=${d/final:/model_final:}
  if [[ $d == note:* ]]; then notes+=("$d"); elif [[ -n $d ]]; then details+=("${d/#final/model_final}"); fi
  d=$(compare_export ckpt) || true; d=${d/ckpt:/checkpoint step_$(cat old.last_step) +optimizer:}
  if [[ $d == note:* ]]; then notes+=("$d"); elif [[ -n $d ]]; then details+=("${d/#ckpt/checkpoint step_$(cat old.last_step) +optimizer}"); fi
  d=$(compare_losses) || true; [[ -z $d ]] || details+=("$d")
  popd >/dev/null
  if [[ ${#details[@]} -eq 0 ]]; then
    printf '%-22s %-6s %7s %7s  %s\n' "$name" PASS "$t_old" "$t_new" \
      "model_final, step_$(cat "$dir/old.last_step") (+optimizer), $(wc -l <"$dir/old.losses.jsonl") loss records identical"
    for d in "${notes[@]}"; do printf '%-22s %-6s %7s %7s  %s\n' "" "" "" "" "$d"; done
    n_pass=$((n_pass + 1))
  else
    printf '%-22s %-6s %7s %7s  %s\n' "$name" FAIL "$t_old" "$t_new" "${details[0]}"
    for d in "${details[@]:1}"; do printf '%-22s %-6s %7s %7s  %s\n' "" "" "" "" "$d"; done
    n_fail=$((n_fail + 1))
    failed+=("$name")
  fi
done

total=${#CASE_LIST[@]}
elapsed=$(fmt_time $((SECONDS - T_START)))
if [[ $n_fail -eq 0 && $n_error -eq 0 ]]; then
  echo "compare-builds: PASS — all $total cases byte-identical (weights, checkpoint with optimizer state, losses) in $elapsed"
  exit 0
fi
echo "compare-builds: FAIL — $n_pass of $total cases identical, $n_fail differ, $n_error failed to run, in $elapsed: ${failed[*]}"
[[ $REMOVE_WORK == 0 ]] || echo "compare-builds: run again with KEEP=1 (or a WORK_DIR) to look at the run dirs"
exit 1
