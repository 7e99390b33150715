#!/usr/bin/env bash
# dtrain's byte-level BPE against the references on npm (tests/parity): tiktoken (OpenAI's Rust
# encoder as WASM) for the gpt2, cl100k_base and o200k_base rank files, Hugging Face's tokenizers.js
# for GPT-2- and Llama-3-style tokenizer.json files made from those ranks. Every parity text, in both
# --special-tokens modes, must give the references' ids through `dtrain data tokenize`, and the
# references' ids must decode to the same bytes. Skipped (77) where node and npm, or the pinned npm
# packages, are not to be had.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to compare the ids"
command -v node >/dev/null && command -v npm >/dev/null ||
  { echo "SKIP: no node and npm here (scripts/install-deps.sh installs Debian's nodejs and npm)"; exit 77; }
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 18 ] || { echo "SKIP: node $(node --version) is older than the references need (18)"; exit 77; }

# The npm packages, installed once per build tree (again when the lock file changes).
npm_dir="$bin/../tokenizer-parity-npm"
if ! cmp -s "$src/tests/parity/package-lock.json" "$npm_dir/installed-lock.json"; then
  rm -rf "$npm_dir" && mkdir -p "$npm_dir"
  cp "$src/tests/parity/package.json" "$src/tests/parity/package-lock.json" "$npm_dir/"
  if ! timeout 600 npm ci --prefix "$npm_dir" --no-audit --no-fund >"$work/npm.out" 2>&1; then
    echo "SKIP: npm ci of tests/parity's packages failed (offline?): $(grep -m1 -i 'err' "$work/npm.out" || tail -1 "$work/npm.out")"
    rm -rf "$npm_dir"
    exit 77
  fi
  cp "$src/tests/parity/package-lock.json" "$npm_dir/installed-lock.json"  # last: marks the install whole
fi

# tests/parity/parity_texts.cjs's texts, and the ones all tokenizer parity tests share (texts.py)
"$py" - "$src/tests/parity/texts.py" >"$work/shared_texts.json" <<'PYEOF'
import json, runpy, sys
texts = runpy.run_path(sys.argv[1])
print(json.dumps(texts["TEXTS"] + texts["MULTILINE"]))
PYEOF
NODE_PATH="$npm_dir/node_modules" node "$src/tests/parity/tokenizer_references.cjs" "$work/ref" "$work/shared_texts.json" \
  >"$work/ref.out" 2>&1 ||
  { cat "$work/ref.out"; fail "the reference script failed"; }
"$py" "$src/tests/parity/check_dtrain_ids.py" "$bin/dtrain" "$work/ref" "$work" || fail "dtrain's ids differ from the references'"
