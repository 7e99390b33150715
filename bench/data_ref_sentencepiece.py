# The SentencePiece reference of bench/data.sh: python3-sentencepiece's encode over each line of a
# text (the documents `dtrain data prepare --docs-by line` makes), the text read before the clock
# starts. Run it on one core (taskset). Prints one JSON line: bytes, lines, tokens, seconds (wall),
# cpu_s (the process's CPU time), mb_per_s (bytes / wall seconds).
# usage: python3 bench/data_ref_sentencepiece.py MODEL TEXT
import json
import sys
import time

import sentencepiece


def main():
    sp = sentencepiece.SentencePieceProcessor(model_file=sys.argv[1])
    with open(sys.argv[2], "rb") as f:
        data = f.read()
    lines = [l for l in data.decode("utf-8").split("\n") if l.strip()]
    start, cpu = time.perf_counter(), time.process_time()
    tokens = sum(len(ids) for ids in map(sp.encode, lines))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(json.dumps({"bytes": len(data), "lines": len(lines), "tokens": tokens, "seconds": seconds,
                      "cpu_s": cpu, "mb_per_s": len(data) / 1e6 / seconds}))


if __name__ == "__main__":
    main()
