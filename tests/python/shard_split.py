# Reads a split of token shards (docs/data-format.md) with the standard library alone, independently of
# dtrain's reader: the manifest and every document's ids. Used by tests/e2e/test_prepare_shards.sh.
# usage as a program: shard_split.py SPLIT_DIR  -> one line per document: its ids, space-separated
import array
import json
import os
import struct
import sys


def read_split(split_dir):
    """(manifest, [ids of each document]) of a split folder."""
    m = json.load(open(os.path.join(split_dir, "manifest.json")))
    ids = array.array("H" if m["id_bytes"] == 2 else "I")
    first = 0
    for s in m["shards"]:
        with open(os.path.join(split_dir, s["file"]), "rb") as f:
            head = f.read(64)
            assert head[:8] == b"DTRSHARD", s["file"]
            version, id_bytes, vocab, crc, n, start = struct.unpack("<IIIIQQ", head[8:40])
            assert (version, id_bytes, n, start) == (1, m["id_bytes"], s["tokens"], first), s["file"]
            ids.frombytes(f.read())
            first += n
    with open(os.path.join(split_dir, "documents.idx"), "rb") as f:
        assert f.read(8) == b"DTRDOCS1"
        count = struct.unpack("<Q", f.read(8))[0]
        offsets = array.array("Q")
        offsets.frombytes(f.read())
    assert len(offsets) == count + 1 and offsets[-1] == len(ids) == m["tokens"]
    return m, [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(count)]


if __name__ == "__main__":
    for doc in read_split(sys.argv[1])[1]:
        print(" ".join(map(str, doc)))
