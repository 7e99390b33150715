# SentencePiece through dtrain against Debian's python3-sentencepiece (the same library's Python
# binding, the reference): models trained by `dtrain data tokenizer train` (BPE, unigram) and by the
# Python trainer encode the parity texts (tests/parity/texts.py) to identical ids and decode them to
# identical text; special-token spellings in both modes; bad tokenizer files.
source "$2/tests/e2e/lib.sh" "$1" "$2" "python3-sentencepiece is the reference"
"$py" -c "import sentencepiece" 2>/dev/null || { echo "SKIP: python3-sentencepiece is not installed (scripts/install-deps.sh installs it)"; exit 77; }
d="$bin/dtrain"
"$py" "$src/tests/parity/texts.py" >"$work/texts.txt"
"$py" "$src/tests/parity/texts.py" --multiline >"$work/multi.jsonl"

"$d" data tokenizer train --input "$work/data/text/train.txt" --vocab-size 1500 --out "$work/bpe.model" >"$work/out.txt"
grep -q "trained $work/bpe.model: SentencePiece model of 1500 pieces" "$work/out.txt" || fail "train summary: $(cat "$work/out.txt")"
[ -f "$work/bpe.vocab" ] || fail "no bpe.vocab beside the model"
"$d" data tokenizer train --input "$work/data/text" --model-type unigram --vocab-size 1200 --no-byte-fallback \
  --out "$work/unigram.model" >/dev/null
"$py" - "$work/data/text/train.txt" "$work/py" <<'PYEOF'
import sentencepiece as spm, sys
spm.SentencePieceTrainer.train(input=sys.argv[1], model_prefix=sys.argv[2], vocab_size=1000, model_type="bpe",
                               minloglevel=2)
PYEOF
ls "$work"/*.tmp* 2>/dev/null && fail "temporary files left beside the models"

# dtrain's ids and decodes against the Python binding's, text by text
for m in bpe unigram py; do
  "$d" data tokenize --tokenizer "$work/$m.model" --input "$work/texts.txt" >"$work/$m.ids"
  "$d" data tokenize --tokenizer "$work/$m.model" --input "$work/$m.ids" --decode >"$work/$m.decoded"
  : >"$work/$m.multi"
  while IFS= read -r line; do
    "$d" data tokenize --tokenizer "$work/$m.model" --text "$("$py" -c 'import json,sys; print(json.loads(sys.argv[1]), end="")' "$line")" >>"$work/$m.multi"
  done <"$work/multi.jsonl"
  "$py" - "$work/$m.model" "$work/texts.txt" "$work/$m.ids" "$work/$m.decoded" "$work/multi.jsonl" "$work/$m.multi" <<'PYEOF'
import json, sys
import sentencepiece as spm
sp = spm.SentencePieceProcessor(model_file=sys.argv[1])
texts = open(sys.argv[2], encoding="utf-8", newline="\n").read().split("\n")[:-1]
ids = [json.loads(l) for l in open(sys.argv[3])]
decoded = open(sys.argv[4], encoding="utf-8", newline="\n").read().split("\n")[:-1]
assert len(ids) == len(texts) == len(decoded), (len(ids), len(texts), len(decoded))
for t, got, dec in zip(texts, ids, decoded):
    want = sp.encode(t)
    assert got == want, f"{sys.argv[1]}: {t!r}: dtrain {got} != sentencepiece {want}"
    assert dec == sp.decode(want), f"{sys.argv[1]}: decode of {t!r}: dtrain {dec!r} != {sp.decode(want)!r}"
multi = [json.loads(l) for l in open(sys.argv[5])]
got = [json.loads(l) for l in open(sys.argv[6])]
for t, g in zip(multi, got):
    assert g == sp.encode(t), f"{t!r}: dtrain {g} != sentencepiece {sp.encode(t)}"
assert len(got) == len(multi)
print(f"ok  {sys.argv[1].rsplit('/', 1)[-1]}: {len(texts) + len(multi)} texts, ids and decodes identical")
PYEOF
done

# a special token's spelling: plain text by default, the control id with --special-tokens special
plain=$("$d" data tokenize --tokenizer "$work/bpe.model" --text "a</s>b")
special=$("$d" data tokenize --tokenizer "$work/bpe.model" --text "a</s>b" --special-tokens special)
[[ $plain != *",2,"* ]] || fail "</s> as text should not give id 2: $plain"
[[ $special == *",2,"* ]] || fail "</s> with --special-tokens special should give id 2: $special"
echo "ok  </s>: text $plain, special $special"
# invalid UTF-8: the library reads each bad byte as U+FFFD (here: its three bytes, by byte fallback)
printf 'caf\xe9\n' >"$work/bad-utf8.txt"
bad=$("$d" data tokenize --tokenizer "$work/bpe.model" --input "$work/bad-utf8.txt")
back=$("$d" data tokenize --tokenizer "$work/bpe.model" --text "$bad" --decode)
[ "$back" = "caf�" ] || fail "invalid UTF-8 should decode as U+FFFD: $back"
echo "ok  invalid UTF-8 -> U+FFFD"

# bad input: one line naming the file
head -c 300 "$work/bpe.model" >"$work/cut.model"
expect_one_error "truncated model" "$work/cut.model" "$d" data tokenize --tokenizer "$work/cut.model" --text hi
: >"$work/empty.model"
expect_one_error "empty file" "is empty" "$d" data tokenize --tokenizer "$work/empty.model" --text hi
expect_one_error "no tokenizer file" "nothing.model" "$d" data tokenize --tokenizer "$work/nothing.model" --text hi
expect_one_error "bad ids" "not a token id" "$d" data tokenize --tokenizer "$work/bpe.model" --text "[1,-2]" --decode
expect_one_error "id past the vocabulary" "outside the vocabulary" "$d" data tokenize --tokenizer "$work/bpe.model" --text "[99999]" --decode
expect_one_error "vocabulary too large" "--vocab-size" "$d" data tokenizer train --input "$work/data/text/valid.txt" \
  --vocab-size 200000 --out "$work/big.model"
[ ! -e "$work/big.model" ] && ! ls "$work"/big* 2>/dev/null || fail "a refused training left files behind"
echo "my notes" >"$work/notes.txt"
expect_one_error "--out over a user's file" "is not a SentencePiece model" "$d" data tokenizer train \
  --input "$work/data/text/train.txt" --vocab-size 500 --out "$work/notes.txt"
[ "$(cat "$work/notes.txt")" = "my notes" ] || fail "the user's file was replaced"
"$d" data tokenizer train --input "$work/data/text/train.txt" --vocab-size 1500 --out "$work/bpe.model" >/dev/null ||
  fail "training again over an earlier model should replace it"
expect_one_error "mode" "use text" "$d" data tokenize --tokenizer "$work/bpe.model" --text hi --special-tokens maybe
# the Llama preset on subword tokens, as scripts/main.sh prepares them: the model takes the tokenizer's
# 2000 pieces as its vocabulary, trains, and generates through the tokenizer its checkpoint keeps
"$d" data tokenizer train --input "$work/data/text/train.txt" --vocab-size 2000 --out "$work/builtin-sp.model" >/dev/null
"$d" data prepare --tokenizer "$work/builtin-sp.model" --input "$work/data/text" --out "$work/builtin-sp" >/dev/null 2>&1
"$d" train --config "$src/configs/llama-tiny.toml" --set data.dir="$work/builtin-sp" --set train.max_steps=4 \
  --set train.progress=false --set train.eval_max_batches=1 --run-dir "$work/llama" >"$work/llama.out" 2>&1 ||
  { cat "$work/llama.out"; fail "llama-tiny on subword tokens failed"; }
grep -q "model: llama (vocab 2000," "$work/llama.out" || fail "the model should take the 2000 pieces: $(grep model: "$work/llama.out")"
cmp -s "$work/llama/model_final/tokenizer.model" "$work/builtin-sp.model" || fail "the checkpoint should keep tokenizer.model"
"$d" generate --checkpoint "$work/llama/model_final" --prompt "The Licensee" --tokens 8 >"$work/gen.out" || fail "generate"
[[ $(head -c 12 "$work/gen.out") == "The Licensee" ]] || fail "generate should continue the prompt: $(cat "$work/gen.out")"
echo "ok  llama-tiny on SentencePiece tokens: $(head -1 "$work/gen.out")"
echo "test_tokenizer_sentencepiece: ok"
