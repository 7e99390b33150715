#!/usr/bin/env bash
# The ranks of a job run one configuration on one data: ranks started with another lr and seed, another
# model size, or other data stop before the first step with one line naming the rank, its host and the
# keys with both values; a copy of the same data in another folder (node-local staging) is accepted.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to pick a free port"
d=$bin/dtrain
common=(--config "$src/configs/quickstart.toml" --set model.dim=32 --set model.heads=2 --set model.layers=1
  --set model.ff_dim=64 --set model.seq_len=16 --set train.batch_size=8 --set data.stride=16 --set train.threads=1
  --set train.progress=false --set train.eval_max_batches=2 --set train.max_steps=3 --set parallel.timeout_s=60)
port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# two NAME "ARGS OF RANK 0" "ARGS OF RANK 1": two ranks started by hand (torchrun-style variables)
two() {
  local name=$1 p; p=$(port)
  read -ra a0 <<<"$2"; read -ra a1 <<<"$3"
  RANK=0 WORLD_SIZE=2 MASTER_PORT=$p timeout 120 "$d" train "${common[@]}" "${a0[@]}" --run-dir "$work/$name" \
    >"$work/$name.0" 2>&1 & local p0=$!
  RANK=1 WORLD_SIZE=2 MASTER_PORT=$p timeout 120 "$d" train "${common[@]}" "${a1[@]}" --run-dir "$work/$name" \
    >"$work/$name.1" 2>&1 & local p1=$!
  rc0=0 rc1=0; wait $p0 || rc0=$?; wait $p1 || rc1=$?
}
differs() {  # NAME NEEDLE "ARGS 0" "ARGS 1": both ranks stop (exit 2), rank 0 says it in one line
  two "$1" "$3" "$4"
  [ $rc0 = 2 ] && [ $rc1 = 2 ] || { cat "$work/$1".?; fail "$1: exits $rc0 and $rc1, expected 2 and 2"; }
  local line; line=$(grep "dtrain: error: " "$work/$1.0")
  [ "$(echo "$line" | wc -l)" = 1 ] || fail "$1: rank 0 should say it once: $line"
  [[ $line == *"rank 1 on $(hostname)"* && $line == *"$2"* ]] || fail "$1: the line lacks the rank or '$2': $line"
  [ ! -e "$work/$1/metrics.jsonl" ] || fail "$1: the job trained"
  echo "ok  $1: $line" | cut -c1-220
}
cp -r "$work/data" "$work/copy"
"$d" data prepare --input "$work/data/text/valid.txt" --out "$work/other" >/dev/null
differs "lr and seed" "train.lr (0.001 there, 0.002 on rank 0), train.seed (2 there, 1 on rank 0)" \
  "--set data.dir=$work/data --set train.lr=0.002" "--set data.dir=$work/data --set train.lr=0.001 --set train.seed=2"
differs "model size" "model.dim (48 there, 32 on rank 0)" "--set data.dir=$work/data" \
  "--set data.dir=$work/data --set model.dim=48"
differs "other data" "(data) (tokens: vocabulary crc32c" "--set data.dir=$work/data" "--set data.dir=$work/other"
two "same data elsewhere" "--set data.dir=$work/data" "--set data.dir=$work/copy"
[ $rc0 = 0 ] && [ $rc1 = 0 ] || { cat "$work/same data elsewhere".?; fail "a copy of the same data was refused"; }
echo "PASS: ranks that disagree stop before the first step, named with their keys"
