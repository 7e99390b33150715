# The steps of bench/data.sh (sourced by it, after its options, $work and $results are set): each
# appends JSON lines to $results, which bench/data_report.py turns into the tables.

# emit KIND [KEY=VALUE ...] < JSON: the JSON object read (or {}) with kind, the pairs and the 1-minute load average
# added, as one line of $results.
emit() {
  python3 -c 'import json, sys
text = sys.stdin.read().strip()
r = json.loads(text) if text else {}
r["kind"] = sys.argv[1]
r["load"] = float(open("/proc/loadavg").read().split()[0])
for kv in sys.argv[2:]:
    k, v = kv.split("=", 1)
    try:
        r[k] = json.loads(v)
    except ValueError:
        r[k] = v
print(json.dumps(r))' "$@" >>"$results"
}

# The npm references of tests/e2e/test_tokenizer_parity.sh, installed into $npm as that test does; false without node.
ensure_npm() {
  command -v node >/dev/null && command -v npm >/dev/null || return 1
  cmp -s "$root/tests/parity/package-lock.json" "$npm/installed-lock.json" && return 0
  rm -rf "$npm" && mkdir -p "$npm"
  cp "$root/tests/parity/package.json" "$root/tests/parity/package-lock.json" "$npm/"
  timeout 600 npm ci --prefix "$npm" --no-audit --no-fund >"$work/npm.out" 2>&1 || { rm -rf "$npm"; return 1; }
  cp "$root/tests/parity/package-lock.json" "$npm/installed-lock.json"
}

# The corpora (text from the builtin corpus' lines) and the three tokenizers: $work/{sp.model,gpt2.tiktoken,vocab.txt}.
make_tokenizers() {
  bench_data "$work/data"
  cp "$work/data/vocab.txt" "$work/vocab.txt"
  python3 "$here/data_corpus.py" "$work/data/text" "$work/text.txt" "$text_mb" 1
  [[ " $parts " != *" memory "* ]] || python3 "$here/data_corpus.py" "$work/data/text" "$work/memory.txt" "$memory_mb" 2
  "$bin/dtrain" data tokenizer train --input "$work/data/text/train.txt" --input "$work/data/text/valid.txt" \
    --input "$work/data/text/test.txt" --vocab-size "$sp_vocab" --model-type bpe --out "$work/sp.model" >/dev/null
  tokenizers="sp word"
  if ensure_npm && NODE_PATH=$npm/node_modules node "$here/data_ref_tiktoken.cjs" ranks "$work/gpt2.tiktoken"; then
    tokenizers="sp gpt2 word"
  else
    echo "no node and npm, or npm ci of tests/parity failed: tiktoken gpt2 and its reference are left out"
  fi
  echo "text corpus $(stat -c %s "$work/text.txt" | awk '{printf "%.0f", $1 / 1e6}') MB; tokenizers: $tokenizers"
}

tokenizer_file() {
  case $1 in sp) echo "$work/sp.model" ;; gpt2) echo "$work/gpt2.tiktoken" ;; word) echo "$work/vocab.txt" ;; esac
}

# run_prepare TOKENIZER TEXT WORKERS [PREPARE-ARGS...]: prints {mb, tokens, wall_s, cpu_s, rss_mib} of one prepare,
# run under "${pin[@]}" (empty, or taskset -c 0 for one core).
run_prepare() {
  local tok=$1 text=$2 w=$3
  shift 3
  rm -rf "$work/out"
  ${pin[@]+"${pin[@]}"} /usr/bin/time -f '%M %e %U %S' -o "$work/time.txt" "$bin/dtrain" data prepare \
    --tokenizer "$(tokenizer_file "$tok")" --input "$text" --docs-by line --split train --out "$work/out" --workers "$w" "$@" \
    >"$work/prep.out" 2>"$work/prep.err" || { cat "$work/prep.out" "$work/prep.err" "$work/time.txt"; exit 1; }
  rm -rf "$work/out"
  python3 - "$text" "$work/prep.err" "$work/time.txt" <<'PY'
import json, os, re, sys
text, err, timing = sys.argv[1:]
tokens = int(re.search(r"MB/s, (\d+) tokens in", open(err).read()).group(1))
rss_kb, wall, user, sys_ = open(timing).read().split()[:4]
print(json.dumps({"mb": os.path.getsize(text) / 1e6, "tokens": tokens, "wall_s": float(wall),
                  "cpu_s": float(user) + float(sys_), "rss_mib": int(rss_kb) / 1024}))
PY
}

# The reference encoder of a tokenizer on core 0 (none for word-level), timed over encoding alone; false without one.
run_reference() {
  local json name
  case $1 in
    sp)
      /usr/bin/python3 -c "import sentencepiece" 2>/dev/null || { echo "no python3-sentencepiece: no reference"; return 1; }
      name="python3-sentencepiece $(/usr/bin/python3 -c 'import sentencepiece as s; print(s.__version__)') encode"
      json=$(taskset -c 0 /usr/bin/python3 "$here/data_ref_sentencepiece.py" "$work/sp.model" "$work/text.txt") ;;
    gpt2)
      name="tiktoken $(node -p "require('$npm/node_modules/tiktoken/package.json').version") WASM encode_ordinary"
      json=$(NODE_PATH=$npm/node_modules taskset -c 0 node "$here/data_ref_tiktoken.cjs" encode "$work/text.txt") ;;
    *) return 1 ;;
  esac
  emit reference tokenizer="$1" name="$name" <<<"$json"
}

# Each tokenizer at each worker count; then, where there is a reference, dtrain with 1 worker on core 0 and the
# reference on core 0, alternated $rounds times (the report keeps the best of each).
prepare_throughput() {
  local tok w json round pin=()
  for tok in $tokenizers; do
    for w in $workers; do
      echo "prepare: $tok, $w workers"
      json=$(run_prepare "$tok" "$work/text.txt" "$w")
      emit prepare tokenizer="$tok" workers="$w" <<<"$json"
    done
    [ "$tok" != word ] || continue  # no reference encoder
    for ((round = 1; round <= rounds; ++round)); do
      echo "reference: $tok, round $round, and dtrain with 1 worker on the same core"
      run_reference "$tok" || break
      pin=(taskset -c 0)
      json=$(run_prepare "$tok" "$work/text.txt" 1)
      pin=()
      emit prepare_core tokenizer="$tok" round="$round" <<<"$json"
    done
  done
}

prepare_memory() {
  local cap w json
  w=$(tr ' ' '\n' <<<"$workers" | sort -n | tail -1)
  if [ "$memory_tokenizer" = auto ]; then
    memory_tokenizer=sp
    [[ " $tokenizers " == *" gpt2 "* ]] && memory_tokenizer=gpt2
  fi
  head -1 "$work/memory.txt" >"$work/one_line.txt"  # the part outside the cap: the program and the tokenizer
  json=$(run_prepare "$memory_tokenizer" "$work/one_line.txt" "$w")
  emit memory_base tokenizer="$memory_tokenizer" workers="$w" <<<"$json"
  for cap in $caps; do
    echo "prepare: $memory_tokenizer, $w workers, --memory-mib $cap, $(stat -c %s "$work/memory.txt") bytes of text"
    json=$(run_prepare "$memory_tokenizer" "$work/memory.txt" "$w" --memory-mib "$cap")
    emit memory tokenizer="$memory_tokenizer" workers="$w" cap_mib="$cap" <<<"$json"
  done
}

# read_ranks MODE R: R ranks reading at once, each the first $read_batches batches of its share of the seeded shuffle
# (one JSON line each). The page cache is made cold or warm once before; mapped: each rank touches every page first.
read_ranks() {
  local mode=$1 n=$2 r pids=() cache=mapped
  local common=(--data "$work/shards/train" --seq "$seq" --batch "$batch" --batches "$read_batches"
    --seconds "$read_seconds" --ranks "$n")
  if [ "$mode" != mapped ]; then
    "$bin/bench_loader" cache --data "$work/shards/train" --cache "$mode" >/dev/null
    cache=as-is
  fi
  for ((r = 0; r < n; ++r)); do
    "$bin/bench_loader" read "${common[@]}" --rank $r --cache $cache >"$work/read$r.json" &
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r"; done
  for ((r = 0; r < n; ++r)); do cat "$work/read$r.json"; done
}

loader_throughput() {
  local extra=() mode n line json
  [ "$shard_tokens" = 0 ] || extra=(--shard-tokens "$shard_tokens")
  echo "loader: writing $loader_gb GB of token shards"
  json=$("$bin/bench_loader" write --tokenizer "$work/sp.model" --out "$work/shards" --gb "$loader_gb" ${extra[@]+"${extra[@]}"})
  emit loader_write <<<"$json"
  /usr/bin/time -f '{"seconds": %e}' -o "$work/verify.json" "$bin/dtrain" data verify "$work/shards" >"$work/verify.out"
  emit verify result="$(cat "$work/verify.out")" <"$work/verify.json"
  for mode in cold warm mapped; do
    for n in $ranks; do
      echo "loader: $mode, $n ranks"
      json=$(read_ranks "$mode" "$n")
      while read -r line; do emit loader mode="$mode" ranks="$n" seq="$seq" batch="$batch" <<<"$line"; done <<<"$json"
    done
  done
  rm -rf "$work/shards"
}

train_rate() {
  local json
  echo "training: $(basename "$train_config"), $train_steps steps"
  json=$("$bin/bench_train" --config "$train_config" --vocab "$sp_vocab" --threads "$(nproc)" --steps "$train_steps" --warmup 1)
  emit train config="$(basename "$train_config")" vocab="$sp_vocab" <<<"$json"
}
