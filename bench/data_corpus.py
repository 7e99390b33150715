# The text corpus of bench/data.sh: the non-blank lines of a seed folder's *.txt files, shuffled
# (seeded) again and again and written one per line until the file holds MEGABYTES MB (whole lines).
# usage: python3 bench/data_corpus.py SEED_DIR OUT_FILE MEGABYTES [SEED]
import pathlib
import random
import sys


def seed_lines(folder):
    lines = []
    for path in sorted(pathlib.Path(folder).glob("*.txt")):
        lines += [l.encode() for l in path.read_text(encoding="utf-8").split("\n") if l.strip()]
    if not lines:
        sys.exit(f"no text lines under {folder}")
    return lines


def main():
    folder, out, megabytes = sys.argv[1], sys.argv[2], float(sys.argv[3])
    rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    lines, left = seed_lines(folder), int(megabytes * 1e6)
    with open(out, "wb") as f:
        while left > 0:
            rng.shuffle(lines)
            block = b"\n".join(lines) + b"\n"
            if len(block) > left:  # the last round: the whole lines that fit
                block = block[: block.rfind(b"\n", 0, left) + 1]
                left = 0
            f.write(block)
            left -= len(block)


if __name__ == "__main__":
    main()
