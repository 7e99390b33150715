#!/usr/bin/env bash
# Image data: `dtrain data prepare --format idx` on IDX files made here (plain and gzip), each bad
# IDX file one error line, a language model pointed at image data refused, and `dtrain data
# fashion-mnist` from Debian's package when it is installed (skipped, and said so, when not).
source "$2/tests/e2e/lib.sh" "$1" "$2" "to write IDX files"
d=$bin/dtrain

# IDX files: 50 train and 20 test images of 4×3 pixels, labels 0..4 (train) and 0..3 (test).
# usage: make_idx DIR [gz]
make_idx() {
  "$py" - "$@" <<'EOF'
import gzip, os, struct, sys
out, gz = sys.argv[1], len(sys.argv) > 2
os.makedirs(out, exist_ok=True)
def images(n): return struct.pack(">IIII", 0x803, n, 4, 3) + bytes((7 * i + 5 * p) % 256 for i in range(n) for p in range(12))
def labels(n, k): return struct.pack(">II", 0x801, n) + bytes(i % k for i in range(n))
files = {"train-images-idx3-ubyte": images(50), "train-labels-idx1-ubyte": labels(50, 5),
         "t10k-images-idx3-ubyte": images(20), "t10k-labels-idx1-ubyte": labels(20, 4)}
for name, data in files.items():
    if gz:
        with gzip.open(os.path.join(out, name + ".gz"), "wb") as f: f.write(data)
    else:
        open(os.path.join(out, name), "wb").write(data)
EOF
}

# 1. Plain files, with --format idx and found without it; gzip files give the same image files.
make_idx "$work/idx"
make_idx "$work/idx_gz" gz
"$d" data prepare --format idx --input "$work/idx" --out "$work/img" --valid-count 10 >"$work/p.out" 2>&1 ||
  fail "prepare --format idx failed: $(cat "$work/p.out")"
grep -q "^prepared $work/img (idx): images 1×4×3, 5 classes; samples train 40, valid 10, test 20; normalised with mean 0\.[0-9]*, std 0\.[0-9]* (computed over train)$" \
  "$work/p.out" || fail "unexpected summary: $(cat "$work/p.out")"
echo "ok  prepare --format idx: $(cat "$work/p.out")"
for f in train.images valid.images test.images meta.json; do [ -s "$work/img/$f" ] || fail "prepare wrote no $f"; done
"$py" - "$work/img/meta.json" <<'EOF' || fail "meta.json does not say what it should"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["format"] == "images" and (m["channels"], m["height"], m["width"], m["classes"]) == (1, 4, 3, 5), m
assert m["class_names"] == ["0", "1", "2", "3", "4"] and m["samples"] == {"train": 40, "valid": 10, "test": 20}, m
assert m["valid_cut"]["count"] == 10 and m["valid_cut"]["seed"] == 1 and 0 < m["mean"] < 1 and m["std"] > 0, m
EOF
"$d" data prepare --input "$work/idx_gz" --out "$work/img_gz" --valid-count 10 >"$work/gz.out" 2>&1 ||
  fail "prepare of gzip IDX files without --format failed: $(cat "$work/gz.out")"
for f in train.images valid.images test.images; do
  cmp -s "$work/img/$f" "$work/img_gz/$f" || fail "$f from gzip files differs from the one from plain files"
done
echo "ok  gzip IDX files found without --format give the same image files"

# 2. Bad files: one line each, naming the file and the problem; nothing prepared.
poke() {  # $1 = file, $2 = offset, $3 = bytes as hex: written over the file's bytes there
  "$py" -c 'import sys; f = open(sys.argv[1], "r+b"); f.seek(int(sys.argv[2])); f.write(bytes.fromhex(sys.argv[3]))' "$@"
}
bad() {  # $1 = name, $2 = needle, then a command run in a fresh copy $work/bad of the plain files
  local name=$1 needle=$2; shift 2
  rm -rf "$work/bad" "$work/bad_out" && cp -r "$work/idx" "$work/bad"
  (cd "$work/bad" && "$@")
  expect_one_error "$name" "$needle" "$d" data prepare --format idx --input "$work/bad" --out "$work/bad_out" --valid-count 10
  [ ! -e "$work/bad_out/meta.json" ] || fail "$name: prepare should write no meta.json"
}
bad "labels given as images (wrong magic)" \
  "$work/bad/train-images-idx3-ubyte is an IDX labels file (magic 0x00000801), but the images file (magic 0x00000803)" \
  cp train-labels-idx1-ubyte train-images-idx3-ubyte
bad "counts that disagree" "holds 50 images but $work/bad/train-labels-idx1-ubyte holds 49 labels" \
  bash -c 'truncate -s -1 train-labels-idx1-ubyte && printf "\x31" | dd of=train-labels-idx1-ubyte bs=1 seek=7 conv=notrunc status=none'
bad "truncated images" "$work/bad/t10k-images-idx3-ubyte is truncated: its header promises 20 images of 4×3" \
  truncate -s -7 t10k-images-idx3-ubyte
bad "trailing garbage" "has 4 bytes of trailing garbage after the 20 labels" bash -c "printf junk >>t10k-labels-idx1-ubyte"
bad "labels out of range" "$work/bad/t10k-labels-idx1-ubyte holds label 7 at sample 3, outside the 5 classes (0..4)" \
  poke t10k-labels-idx1-ubyte 11 07
bad "one damaged train label" "has labels up to 200 but 195 of the classes below never occur" \
  poke train-labels-idx1-ubyte 20 c8
bad "a damaged gzip stream" "$work/bad/train-images-idx3-ubyte.gz is a damaged gzip stream" \
  bash -c "gzip train-images-idx3-ubyte && $(declare -f poke); py=$py; poke train-images-idx3-ubyte.gz 30 00000000000000000000000000000000"
bad "a missing file" "but no t10k-labels-idx1-ubyte[.gz]" rm t10k-labels-idx1-ubyte
expect_one_error "--classes below the labels" "holds label 3 at sample 3, outside the 3 classes (0..2)" \
  "$d" data prepare --format idx --input "$work/idx" --out "$work/c3" --classes 3 --valid-count 10
expect_one_error "a valid cut of all of train" "--valid-count 50 does not fit the 50 train samples" \
  "$d" data prepare --format idx --input "$work/idx" --out "$work/v50" --valid-count 50

# 3. A language model pointed at image data: one line.
common=(--config "$src/configs/quickstart.toml" --set train.threads=1 --set train.progress=false --set train.max_steps=1)
expect_one_error "a language model on image data" \
  "data $work/img holds images (1×4×3, 5 classes) for an image classifier, but the model reads tokens" \
  "$d" train "${common[@]}" --set data.dir="$work/img" --run-dir "$work/run_img"

# 4. Fashion-MNIST from Debian's package.
fm=/usr/share/datasets/fashion-mnist
if [ ! -d "$fm" ]; then
  echo "skip  dtrain data fashion-mnist: $fm is not installed (apt-get install dataset-fashion-mnist)"
else
  "$d" data fashion-mnist --out "$work/fashion" >"$work/fm.out" 2>&1 || fail "data fashion-mnist failed: $(cat "$work/fm.out")"
  grep -q "^prepared $work/fashion (Fashion-MNIST, idx): images 1×28×28, 10 classes; samples train 55000, valid 5000, test 10000; normalised with mean 0\.28[5-6][0-9], std 0\.35[23][0-9] (computed over train)$" \
    "$work/fm.out" || fail "Fashion-MNIST: expected mean ≈ 0.286, std ≈ 0.353, saw: $(cat "$work/fm.out")"
  "$py" -c 'import json, sys; m = json.load(open(sys.argv[1])); assert m["class_names"][0] == "T-shirt/top" and m["class_names"][9] == "Ankle boot", m["class_names"]' \
    "$work/fashion/meta.json" || fail "Fashion-MNIST's meta.json should name its ten classes"
  echo "ok  $(cat "$work/fm.out")"
fi
echo PASS
