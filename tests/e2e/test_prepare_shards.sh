#!/usr/bin/env bash
# `dtrain data prepare --tokenizer` end to end: text files, folders, JSONL, gzip, zstd and HDF5 inputs
# (word-level and SentencePiece tokenizers, ids checked by an independent reader); the same bytes at 1
# and 3 workers; a corpus three times --memory-mib prepared within the cap; every bad input refused on
# one line with nothing left behind; a kill mid-run then a re-run giving the uninterrupted bytes; a
# truncated or altered shard refused by `dtrain data verify`.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to write the inputs and read the shards"
d=$bin/dtrain
"$py" -c "import h5py, sentencepiece" 2>/dev/null ||
  { echo "SKIP: $py lacks h5py or sentencepiece (scripts/install-deps.sh installs python3-h5py, python3-sentencepiece)"; exit 77; }
command -v zstd >/dev/null || { echo "SKIP: no zstd program (scripts/install-deps.sh installs zstd)"; exit 77; }
export PYTHONPATH=$src/tests/python
vocab=$work/data/vocab.txt
text=$work/data/text
"$py" -c "import sentencepiece as s; s.SentencePieceTrainer.train(input='$text/train.txt', model_prefix='$work/sp',
  vocab_size=800, minloglevel=2)" || fail "could not train a SentencePiece model"
sp=$work/sp.model

prep() {  # $1 = output name under $work, then prepare's arguments
  local out=$work/$1; shift
  "$d" data prepare --out "$out" "$@" >"$out.out" 2>"$out.err" || { cat "$out.out" "$out.err"; fail "prepare $out failed"; }
}
field() { "$py" -c "import json,sys; print(json.load(open(sys.argv[1]))$2)" "$work/$1/manifest.json"; }
same_shards() {  # $1, $2 = split folders: the same shards and document index (manifests name other inputs)
  local f
  for f in "$1"/*.bin "$1"/documents.idx; do cmp -s "$f" "$2/${f##*/}" || return 1; done
  [ "$(ls "$1" | wc -l)" = "$(ls "$2" | wc -l)" ]
}

# 1. Text: a folder (a document per file) and a file read a line per document; the tokenizer copied in.
prep folder --tokenizer "$vocab" --input "$text" --split train --workers 2
[ "$(field folder/train "['documents']")" = 3 ] || fail "a folder of 3 text files should give 3 documents"
cmp -s "$vocab" "$work/folder/vocab.txt" || fail "the tokenizer should be copied in as vocab.txt"
[ ! -e "$work/folder/valid" ] && [ ! -e "$work/folder/train.partial" ] || fail "only train/ should be there"
lines=$(grep -cv '^[[:space:]]*$' "$text/train.txt")
prep lines --tokenizer "$vocab" --input "$text/train.txt" --docs-by line --split train
[ "$(field lines/train "['documents']")" = "$lines" ] || fail "each of the $lines non-blank lines should be a document"
grep -qF "train: $lines documents" "$work/lines.out" || fail "the summary should count the documents: $(cat "$work/lines.out")"
[ "$(wc -l <"$work/lines.err")" = 1 ] && grep -q "MB/s" "$work/lines.err" || fail "stderr should hold one summary line"
echo "ok  text: a folder (3 documents), $lines lines, vocab.txt copied"

# 2. JSONL, gzip and zstd (and gzip under a .jsonl name: told by its magic bytes) give the same shards;
#    SentencePiece's own encoding of each line, then EOS, is what the shards hold.
"$py" - "$text/train.txt" "$work/c.jsonl" <<'EOF'
import json, sys
with open(sys.argv[2], "w") as f:
    for i, line in enumerate(open(sys.argv[1], encoding="utf-8")):
        if line.strip():
            f.write(json.dumps({"id": i, "text": line.rstrip("\n")}) + "\n")
EOF
gzip -c "$work/c.jsonl" >"$work/c.jsonl.gz"
gzip -c "$work/c.jsonl" >"$work/gzip-inside.jsonl"
zstd -q -c "$work/c.jsonl" >"$work/c.jsonl.zst"
for f in c.jsonl c.jsonl.gz gzip-inside.jsonl c.jsonl.zst; do
  prep "j_$f" --tokenizer "$sp" --input "$work/$f" --split train --shard-tokens 7000
  same_shards "$work/j_c.jsonl/train" "$work/j_$f/train" || fail "$f gives other shards than c.jsonl"
done
cmp -s "$sp" "$work/j_c.jsonl/tokenizer.model" || fail "the SentencePiece model should be copied as tokenizer.model"
"$py" - "$work/j_c.jsonl/train" "$sp" "$work/c.jsonl" <<'EOF' || fail "the shards do not hold SentencePiece's ids"
import json, sys, sentencepiece
from shard_split import read_split
m, docs = read_split(sys.argv[1])
sp = sentencepiece.SentencePieceProcessor(model_file=sys.argv[2])
texts = [json.loads(l)["text"] for l in open(sys.argv[3], encoding="utf-8")]
assert m["tokenizer"]["kind"] == "sentencepiece" and m["id_bytes"] == 2 and len(m["shards"]) > 3
assert len(docs) == len(texts), (len(docs), len(texts))
for doc, t in zip(docs, texts):
    assert doc == sp.encode(t) + [sp.eos_id()], t
EOF
echo "ok  JSONL, .gz, .zst, gzip named .jsonl: the same shards, SentencePiece's ids"
# --special-tokens special: the spelling of EOS in the text becomes EOS; --no-eos: none after a document.
printf '{"text": "alpha </s> beta"}\n' >"$work/special.jsonl"
prep special --tokenizer "$sp" --input "$work/special.jsonl" --split train --special-tokens special --no-eos
prep plain --tokenizer "$sp" --input "$work/special.jsonl" --split train
"$py" - "$work/special/train" "$work/plain/train" "$sp" <<'EOF' || fail "--special-tokens special or --no-eos is not honoured"
import sys, sentencepiece
from shard_split import read_split
sp = sentencepiece.SentencePieceProcessor(model_file=sys.argv[3])
special, plain = read_split(sys.argv[1])[1][0], read_split(sys.argv[2])[1][0]
assert special == sp.encode("alpha") + [sp.eos_id()] + sp.encode(" beta"), special
assert plain == sp.encode("alpha </s> beta") + [sp.eos_id()] and plain.count(sp.eos_id()) == 1, plain
EOF
echo "ok  --special-tokens special (</s> in the text is EOS), --no-eos"
# A JSONL line longer than a piece (64 KiB) is cut like a text file of its text.
"$py" - "$text/train.txt" "$work/long.jsonl" "$work/long" <<'EOF'
import json, os, sys
base = open(sys.argv[1], encoding="utf-8").read()
texts = ["a short one", base[:200_000] + " ünïcödé " * 3000, "another short one"]
os.makedirs(sys.argv[3])
with open(sys.argv[2], "w", encoding="utf-8") as f:
    for i, t in enumerate(texts):
        f.write(json.dumps({"text": t}) + "\n")
        open(os.path.join(sys.argv[3], f"{i}.txt"), "w", encoding="utf-8").write(t)
EOF
prep longj --tokenizer "$sp" --input "$work/long.jsonl" --split train
prep longt --tokenizer "$sp" --input "$work/long" --split train
same_shards "$work/longj/train" "$work/longt/train" || fail "a long JSONL line should give its text file's ids"
echo "ok  a JSONL line of $(stat -c %s "$work/long.jsonl") bytes: the ids of its text as a file"

# 3. HDF5: variable- and fixed-length strings (a document each), ids in 1-D and 2-D datasets.
"$py" - "$work/c.jsonl" "$work/corpus.h5" <<'EOF'
import h5py, json, sys
texts = [json.loads(l)["text"] for l in open(sys.argv[1], encoding="utf-8")]
with h5py.File(sys.argv[2], "w") as f:
    f.create_dataset("text", data=texts, dtype=h5py.string_dtype("utf-8"), chunks=(64,))
    f.create_dataset("fixed", data=[t.encode()[:40] for t in texts[:50]], dtype="S40")
    f.create_dataset("rows", data=[[5, 6, 7], [8, 9, 10]], dtype="int32")
    f.create_dataset("flat", data=list(range(3, 503)), dtype="uint16")
    f.create_dataset("badid", data=[[5, 6, 7], [8, 9, 900]], dtype="int64")
    f.create_dataset("floats", data=[1.5, 2.5])
EOF
prep h5 --tokenizer "$sp" --input "$work/corpus.h5" --dataset text --split train --shard-tokens 7000
same_shards "$work/j_c.jsonl/train" "$work/h5/train" ||
  fail "an HDF5 string dataset of the JSONL's texts should give the same shards"
prep h5fixed --tokenizer "$sp" --input "$work/corpus.h5" --dataset fixed --split train
[ "$(field h5fixed/train "['documents']")" = 50 ] || fail "50 fixed-length strings should be 50 documents"
prep h5rows --tokenizer "$sp" --input "$work/corpus.h5" --dataset rows --split train
prep h5flat --tokenizer "$sp" --input "$work/corpus.h5" --dataset flat --split train --bos
"$py" - "$work/h5rows/train" "$work/h5flat/train" <<'EOF' || fail "HDF5 ids should be kept as they are, with EOS (and BOS)"
import sys
from shard_split import read_split
assert read_split(sys.argv[1])[1] == [[5, 6, 7, 2], [8, 9, 10, 2]], read_split(sys.argv[1])[1]
assert read_split(sys.argv[2])[1] == [[1] + list(range(3, 503)) + [2]]
EOF
echo "ok  HDF5: strings as JSONL's shards, 50 fixed-length strings, ids of 2-D rows and of a 1-D dataset (--bos)"

# 4. The same bytes at 1 and 3 workers: documents longer than a piece (64 KiB), several inputs and shards.
"$py" - "$text/train.txt" "$work/big" <<'EOF'
import os, sys
base = open(sys.argv[1], encoding="utf-8").read()
os.makedirs(sys.argv[2])
for k in range(4):  # 4 documents of ~25 MB: 100 MB in all
    with open(os.path.join(sys.argv[2], f"part{k}.txt"), "w", encoding="utf-8") as f:
        for i in range(25_000_000 // len(base) + 1):
            f.write(f"copy {k} {i}\n{base}")
EOF
prep w1 --tokenizer "$sp" --input "$text" --input "$work/c.jsonl.zst" --shard-tokens 5000 --workers 1 --memory-mib 32
prep w3 --tokenizer "$sp" --input "$text" --input "$work/c.jsonl.zst" --shard-tokens 5000 --workers 3 --memory-mib 32
diff -r "$work/w1" "$work/w3" || fail "1 and 3 workers should write the same bytes"
echo "ok  1 and 3 workers: identical folders ($(ls "$work/w1/train" | wc -l) files in train/)"
prep w3 --tokenizer "$sp" --input "$text" --input "$work/c.jsonl.zst" --shard-tokens 5000 --workers 2 --memory-mib 32
diff -r "$work/w1" "$work/w3" || fail "a prepare over an earlier one should replace it with the same bytes"
# --split adds one split beside the others, with the same tokenizer only.
prep splits --tokenizer "$sp" --input "$text/train.txt" --split train
prep splits --tokenizer "$sp" --input "$text/valid.txt" --split valid
"$d" data verify "$work/splits" | grep -c ": OK" | grep -qx 2 || fail "train and valid should both be there"
expect_one_error "--split with another tokenizer" "was prepared with another tokenizer" \
  "$d" data prepare --tokenizer "$vocab" --input "$text/test.txt" --split test --out "$work/splits"
echo "ok  a prepare over an earlier one; --split train then --split valid into one folder"

# 5. 100 MB prepared under --memory-mib 32. Peak RSS may exceed the cap by what any prepare holds
#    (program, libraries, tokenizer, buffers: a tiny corpus's peak, measured) plus 16 MiB: the
#    tokenizer's scratch of a piece per worker and the allocator's slack.
peak_kib() {  # runs prepare with the given arguments; prints its peak resident memory in KiB
  "$py" -c "import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)" "$d" data prepare "$@"
}
big=(--tokenizer "$vocab" --input "$work/big" --split train --shard-tokens 2000000 --memory-mib 32)
base=$(peak_kib --tokenizer "$vocab" --input "$text/valid.txt" --out "$work/tiny" --split train --workers 2)
peak=$(peak_kib "${big[@]}" --out "$work/mem" --workers 2) || fail "prepare of 100 MB under 32 MiB failed"
allowed=$((base + (32 + 16) * 1024))
[ "$peak" -le "$allowed" ] || fail "peak RSS $peak KiB is over the cap + allowance ($allowed KiB; tiny corpus: $base KiB)"
[ "$(field mem/train "['documents']")" = 4 ] || fail "4 files should be 4 documents"
echo "ok  100 MB under --memory-mib 32: peak RSS $((peak / 1024)) MiB (tiny corpus $((base / 1024)) MiB, allowed $((allowed / 1024)) MiB)"

# 6. Killed mid-run (SIGKILL): nothing loadable is left; a re-run removes the stale train.partial and
#    writes the bytes of an uninterrupted run (of another worker count). SentencePiece on 50 MB: a run
#    long enough for the kill to land in it.
big=(--tokenizer "$sp" --input "$work/big/part0.txt" --input "$work/big/part1.txt" --shard-tokens 1000000)
prep ref "${big[@]}" --workers 2
for attempt in 1 2 3; do
  rm -rf "$work/killed"
  "$d" data prepare "${big[@]}" --out "$work/killed" --workers 1 >/dev/null 2>&1 &
  victim=$!
  pids+=("$victim")
  wait_for 60 test -e "$work/killed/train.partial/shard-00001.bin" || fail "no shard appeared"
  kill -9 "$victim" 2>/dev/null || true
  rc=0; wait "$victim" 2>/dev/null || rc=$?
  [ "$rc" = 137 ] && break
  echo "note: the prepare ended (rc $rc) before the kill; again"
done
[ "$rc" = 137 ] || fail "could not kill a prepare mid-run"
[ -d "$work/killed/train.partial" ] && [ ! -e "$work/killed/train" ] || fail "a killed prepare should leave train.partial only"
expect_one_error "verify after a kill" "holds no prepared split" "$d" data verify "$work/killed"
prep killed "${big[@]}" --workers 2
[ ! -e "$work/killed/train.partial" ] || fail "the re-run should remove train.partial"
diff -r "$work/ref" "$work/killed" || fail "the re-run after a kill should write the uninterrupted run's bytes"
echo "ok  killed mid-run, then re-run: the uninterrupted bytes"

# 7. Bad inputs: one line naming the file (and line) and the fix, exit 2, nothing left behind.
printf '{"text": "alpha"}\n{"text": "beta"}\n{"text": "gamma"\n' >"$work/notjson.jsonl"
printf '{"text": "alpha"}\n{"body": "beta"}\n' >"$work/nokey.jsonl"
printf '{"text": "alpha"}\n\n{"text": 5}\n' >"$work/number.jsonl"
printf '\n  \n\n' >"$work/blank.txt"
head -c 3000 "$work/c.jsonl.gz" >"$work/cut.jsonl.gz"
head -c 3000 "$work/c.jsonl.zst" >"$work/cut.jsonl.zst"
cp "$work/c.jsonl.gz" "$work/flipped.jsonl.gz"
printf '\xff\xff\xff\xff' | dd of="$work/flipped.jsonl.gz" bs=1 seek=2000 conv=notrunc status=none
cp "$work/c.jsonl.zst" "$work/flipped.jsonl.zst"
printf '\xff\xff\xff\xff' | dd of="$work/flipped.jsonl.zst" bs=1 seek=2000 conv=notrunc status=none
bad() {  # $1 = case, $2 = what the error must say, then prepare's arguments (into $work/bad)
  local name=$1 needle=$2; shift 2
  expect_one_error "$name" "$needle" "$d" data prepare --out "$work/bad" "$@"
  [ ! -e "$work/bad" ] || fail "$name: $work/bad should not be left"
}
bad "JSONL line not JSON" "line 3 of $work/notjson.jsonl is not JSON" --tokenizer "$sp" --input "$work/notjson.jsonl"
bad "JSONL line without the key" "line 2 of $work/nokey.jsonl has no \"text\" key" --tokenizer "$sp" \
  --input "$work/c.jsonl" --input "$work/nokey.jsonl"
bad "JSONL value not a string" "line 3 of $work/number.jsonl: \"text\" holds a number, not a string" \
  --tokenizer "$sp" --input "$work/number.jsonl" --workers 3
bad "HDF5 without the dataset" "input $work/corpus.h5 has no dataset nope" --tokenizer "$sp" \
  --input "$work/corpus.h5" --dataset nope
bad "HDF5 without --dataset" "is an HDF5 file: name the dataset" --tokenizer "$sp" --input "$work/corpus.h5"
bad "HDF5 of floats" "dataset floats of $work/corpus.h5 is of type floating-point" --tokenizer "$sp" \
  --input "$work/corpus.h5" --dataset floats
bad "HDF5 id outside the vocabulary" "holds id 900 at row 1, column 2, outside the vocabulary of 800" \
  --tokenizer "$sp" --input "$work/corpus.h5" --dataset badid
bad "no documents" "the inputs hold no documents" --tokenizer "$sp" --input "$work/blank.txt" --docs-by line
bad "missing input" "input $work/nothing.txt not found" --tokenizer "$sp" --input "$work/nothing.txt"
bad "truncated gzip" "input $work/cut.jsonl.gz is a damaged or truncated gzip stream" --tokenizer "$sp" \
  --input "$work/cut.jsonl.gz"
bad "damaged gzip" "input $work/flipped.jsonl.gz is a damaged or truncated gzip stream" --tokenizer "$sp" \
  --input "$work/flipped.jsonl.gz"
bad "truncated zstd" "input $work/cut.jsonl.zst is a damaged or truncated zstd stream" --tokenizer "$sp" \
  --input "$work/cut.jsonl.zst"
bad "damaged zstd" "input $work/flipped.jsonl.zst is a damaged or truncated zstd stream" --tokenizer "$sp" \
  --input "$work/flipped.jsonl.zst"
bad "binary input" "input /bin/ls is a binary file" --tokenizer "$sp" --input /bin/ls
bad "memory cap too small" "--memory-mib 8 is too small" --tokenizer "$sp" --input "$work/c.jsonl" --memory-mib 8
"$d" data prepare --input "$text/train.txt" --out "$work/noeos" --no-eos >/dev/null
bad "tokenizer without EOS" "has no EOS id to end documents with" --tokenizer "$work/noeos/vocab.txt" --input "$text"
expect_one_error "an --out of other files" "holds what dtrain data prepare --tokenizer did not make" \
  "$d" data prepare --tokenizer "$sp" --input "$work/c.jsonl" --out "$text"

# 8. A shard truncated or altered after prepare: refused by verify (and truncation when opened).
cp -r "$work/j_c.jsonl" "$work/damaged"
"$d" data verify "$work/damaged" | grep -q "train: OK" || fail "verify of a sound folder should say OK"
truncate -s -2 "$work/damaged/train/shard-00001.bin"
expect_one_error "verify of a truncated shard" "token shard $work/damaged/train/shard-00001.bin is truncated" \
  "$d" data verify "$work/damaged"
grep -qF "prepare it again" "$work/case.err" || fail "the error should say to prepare again"
cp -r "$work/j_c.jsonl" "$work/altered"
printf '\x01\x02' | dd of="$work/altered/train/shard-00002.bin" bs=1 seek=100 conv=notrunc status=none
expect_one_error "verify of an altered shard" "token shard $work/altered/train/shard-00002.bin was altered" \
  "$d" data verify "$work/altered"
echo PASS
