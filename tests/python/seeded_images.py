"""Writes seeded 28×28 IDX image files a CNN can learn a little of: class k is a bright band at rows
2k..2k+5 with noise elsewhere, labels 0-9 (the MNIST tests' and scripts/compare-builds.sh's data).

usage: seeded_images.py OUT_DIR TRAIN_COUNT TEST_COUNT   (OUT_DIR must not exist)
"""
import os
import random
import struct
import sys


def main(out, train, test):
    os.makedirs(out)
    rng = random.Random(3)
    for split, n in (("train", train), ("t10k", test)):
        labels = [rng.randrange(10) for _ in range(n)]
        pixels = bytearray()
        for k in labels:
            pixels += bytes(255 if 2 * k <= p // 28 < 2 * k + 6 else rng.randrange(64) for p in range(784))
        with open(os.path.join(out, f"{split}-images-idx3-ubyte"), "wb") as f:
            f.write(struct.pack(">IIII", 0x803, n, 28, 28) + pixels)
        with open(os.path.join(out, f"{split}-labels-idx1-ubyte"), "wb") as f:
            f.write(struct.pack(">II", 0x801, n) + bytes(labels))


if __name__ == "__main__":
    if len(sys.argv) != 4 or not sys.argv[2].isdigit() or not sys.argv[3].isdigit():
        sys.exit(__doc__.strip().splitlines()[-1])
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
