"""dtrain's side of tests/e2e/test_tokenizer_parity.sh: encodes every parity text with
`dtrain data tokenize` in both special-token modes for each tokenizer file the references wrote, and
decodes the references' ids back; exits 1 at the first text whose ids (or decoded text) differ,
printing where. Usage: check_dtrain_ids.py DTRAIN REFERENCE_DIR WORK_DIR"""
import base64
import json
import os
import subprocess
import sys


def run(dtrain, args):
    done = subprocess.run([dtrain, "data", "tokenize", *args], capture_output=True, timeout=600)
    if done.returncode != 0:
        sys.exit(f"FAIL: dtrain data tokenize {' '.join(args[:4])} ... exited {done.returncode}: "
                 f"{done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def encode_all(dtrain, tokenizer, mode, texts, work):
    """dtrain's ids of each text: those without a line break through one --input file (one line
    each), the others (and the empty text) one --text at a time."""
    ids = [None] * len(texts)
    batch = [i for i, t in enumerate(texts) if t and "\n" not in t]
    lines_file = os.path.join(work, "lines.txt")
    with open(lines_file, "wb") as f:
        f.write(b"".join(texts[i].encode() + b"\n" for i in batch))
    out = run(dtrain, ["--tokenizer", tokenizer, "--special-tokens", mode, "--input", lines_file]).splitlines()
    if len(out) != len(batch):
        sys.exit(f"FAIL: {tokenizer} --input gave {len(out)} lines for {len(batch)} texts")
    for i, line in zip(batch, out):
        ids[i] = json.loads(line)
    for i, t in enumerate(texts):
        if ids[i] is None:
            ids[i] = json.loads(run(dtrain, ["--tokenizer", tokenizer, "--special-tokens", mode, "--text", t]))
    return ids


def first_difference(name, mode, text, want, got):
    at = next((k for k, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want), len(got)))
    return (f"FAIL: {name}, --special-tokens {mode}, text {text['name']!r} ({text['text'][:80]!r}): "
            f"first difference at id {at} of {len(want)}: reference {want[max(0, at - 3):at + 5]}, "
            f"dtrain {got[max(0, at - 3):at + 5]} (reference {len(want)} ids, dtrain {len(got)})")


def check_decode(dtrain, tokenizer, name, texts, ids, decoded, work):
    """`--decode --input` of the reference ids (one JSON array a line) prints what each stands for
    and a line end: together, exactly the references' decoded bytes, each followed by a line end."""
    ids_file = os.path.join(work, "ids.txt")
    with open(ids_file, "w") as f:
        f.write("".join(json.dumps(x) + "\n" for x in ids))
    got = run(dtrain, ["--tokenizer", tokenizer, "--decode", "--input", ids_file])
    at = 0
    for t, want in zip(texts, decoded):
        want = base64.b64decode(want) + b"\n"
        if got[at:at + len(want)] != want:
            sys.exit(f"FAIL: {name} --decode: text {t['name']!r} decodes to {got[at:at + len(want)][:80]!r}, "
                     f"not {want[:80]!r}")
        at += len(want)
    if at != len(got):
        sys.exit(f"FAIL: {name} --decode printed {len(got) - at} bytes past the texts")


def main():
    dtrain, refs_dir, work = sys.argv[1:4]
    with open(os.path.join(refs_dir, "references.json")) as f:
        refs = json.load(f)
    texts = refs["texts"]
    compared = 0
    for name, by_mode in refs["files"].items():
        tokenizer = os.path.join(refs_dir, name)
        for mode in ("text", "special"):
            got = encode_all(dtrain, tokenizer, mode, [t["text"] for t in texts], work)
            for text, want, have in zip(texts, by_mode[mode], got):
                if want is None:
                    continue  # a text this reference does not read as Rust's engines do
                if have != want:
                    sys.exit(first_difference(name, mode, text, want, have))
                compared += 1
        checked = [k for k, ids in enumerate(by_mode["special"]) if ids is not None]
        check_decode(dtrain, tokenizer, name, [texts[k] for k in checked], [by_mode["special"][k] for k in checked],
                     [by_mode["decoded"][k] for k in checked], work)
        print(f"ok  {name}: {len(checked)} texts, both modes, and decode")
    print(f"ok  {compared} encodings identical to the references")


main()
