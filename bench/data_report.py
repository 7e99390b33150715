# The tables of bench/data.sh from its results.jsonl: prepare throughput against the reference encoders,
# the loader per rank against a training step's token rate, prepare's peak RSS against --memory-mib.
# usage: python3 bench/data_report.py RESULTS.jsonl
import json
import sys

NAMES = {"sp": "sentencepiece", "gpt2": "tiktoken gpt2", "word": "word vocab.txt"}


def table(header, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    for row in [header] + rows:
        print("  ".join(str(x).rjust(w) for x, w in zip(row, widths)))


def best(runs):
    """The fastest run (wall time) of each tokenizer."""
    out = {}
    for r in runs:
        if r["tokenizer"] not in out or r["wall_s"] < out[r["tokenizer"]]["wall_s"]:
            out[r["tokenizer"]] = r
    return out


def mb_s(r, seconds="wall_s"):
    return (r["mb"] if "mb" in r else r["bytes"] / 1e6) / r[seconds]


def scaling_table(runs, refs):
    print("\n1. prepare throughput (--docs-by line, the whole prepare: reading, encoding, shards written and fsynced)")
    rows = []
    for r in runs:
        first, ref = next(x for x in runs if x["tokenizer"] == r["tokenizer"]), refs.get(r["tokenizer"])
        per = mb_s(r) / r["workers"]
        rows.append([NAMES[r["tokenizer"]], r["workers"], f"{mb_s(r):.1f}", f"{per:.1f}",
                     f"{mb_s(r) / mb_s(first):.2f}x", f"{mb_s(r, 'cpu_s'):.1f}",
                     f"{per / mb_s(ref, 'seconds'):.2f}x" if ref else "-", f"{r['rss_mib']:.0f}"])
    table(["tokenizer", "workers", "MB/s", "MB/s/worker", "scaling", "MB/CPU-s", "per worker/ref", "RSS MiB"], rows)
    print("MB/s: text MB / wall seconds; scaling: against the first worker count; MB/CPU-s: text MB per second of"
          " CPU time (user + system); per worker/ref: against the reference's best MB/s on one core (below)")


def core_table(results, refs):
    cores = best([r for r in results if r["kind"] == "prepare_core"])
    if not cores:
        return
    rounds = max(r["round"] for r in results if r["kind"] == "prepare_core")
    print(f"\n1b. one core, side by side: dtrain prepare --workers 1 under taskset -c 0 (all of it) against the"
          f" reference under taskset -c 0 (encoding alone, the text read first); best of {rounds} alternated rounds")
    rows, verdicts = [], []
    for tok, d in cores.items():
        ref = refs[tok]
        ratio = mb_s(d) / mb_s(ref, "seconds")
        same = d["tokens"] == ref["tokens"] + ref["lines"]
        rows.append([NAMES[tok], ref["name"], f"{mb_s(d):.2f}", f"{mb_s(ref, 'seconds'):.2f}", f"{ratio:.2f}x",
                     f"{mb_s(d, 'cpu_s'):.2f}", f"{mb_s(ref, 'cpu_s'):.2f}", f"{mb_s(d, 'cpu_s') / mb_s(ref, 'cpu_s'):.2f}x",
                     "yes" if same else f"NO ({d['tokens']} vs {ref['tokens']} + {ref['lines']} EOS)"])
        verdicts.append(f"{NAMES[tok]}: {ratio:.2f}x the reference on one core: {'PASS' if ratio >= 1 else 'FAIL'}")
    table(["tokenizer", "reference", "dtrain MB/s", "ref MB/s", "ratio", "dtrain MB/CPU-s", "ref MB/CPU-s", "ratio",
           "same ids (+EOS)"], rows)
    print("target: prepare >= the reference's speed per core")
    for v in verdicts:
        print("  " + v)


def prepare_table(results):
    refs = best([r | {"wall_s": r["seconds"]} for r in results if r["kind"] == "reference"])
    scaling_table([r for r in results if r["kind"] == "prepare"], refs)
    core_table(results, refs)


def loader_table(results):
    train = next((r for r in results if r["kind"] == "train"), None)
    write = next(r for r in results if r["kind"] == "loader_write")
    verify = next((r for r in results if r["kind"] == "verify"), None)
    runs = [r for r in results if r["kind"] == "loader"]
    print(f"\n2. loader per rank: {write['tokens'] / 1e9:.2f}G tokens ({write['tokens'] * write['id_bytes'] / 1e9:.2f} GB,"
          f" {write['shards']} shards, {write['documents']} documents) written in {write['seconds']:.1f} s"
          + (f", dtrain data verify {verify['seconds']:.1f} s" if verify else "")
          + f"; windows of seq {runs[0]['seq']}, batch {runs[0]['batch']}, seeded shuffle")
    rate = train["tokens_per_s"] if train else None
    rows = [[r["mode"], r["ranks"], f"{r['resident_before']:.0%}", f"{r['tokens_per_s'] / 1e6:.2f}",
             f"{r['mb_per_s']:.1f}", f"{r['storage_mb']:.0f}", r["major_faults"], r["batches"],
             f"{r['first']['tokens_per_s'] / 1e6:.2f}", f"{r['first']['storage_mb']:.0f}",
             f"{r['open_and_shuffle_s']:.2f}", f"{rate / r['tokens_per_s']:.4%}" if rate else "-",
             f"{rate / r['first']['tokens_per_s']:.3%}" if rate else "-"] for r in runs]
    first = runs[0]["first"]["batches"]
    table(["cache", "ranks", "resident", "Mtokens/s", "MB/s", "storage MB", "majflt", "batches",
           f"first {first}: Mtok/s", "storage MB", "open+shuffle s", "step share", "first"], rows)
    print(f"per rank, the first batches of its share of the epoch (ranks > 1: a row each, all reading at once);"
          f" MB/s: the shard bytes of the windows read;"
          f" storage MB: read from the disk (/proc/self/io); first {first}: the first {first} batches alone;"
          " resident: the corpus' share in the page cache before; mapped: every page touched once before (as in a"
          " later epoch of the same process)")
    if train:
        print(f"training step: {train['config']} (vocabulary {train['vocab']}, {train['params']} parameters), "
              f"{train['tokens_per_s']:.0f} tokens/s, {train['step_ms']:.0f} ms per step; step share = its tokens/s"
              " / the loader's: the part of a step the data phase would take if nothing overlapped it")


def memory_table(results):
    runs = [r for r in results if r["kind"] == "memory"]
    base = next((r for r in results if r["kind"] == "memory_base"), None)
    print("\n3. prepare's peak RSS against --memory-mib (a corpus larger than the cap; base: the same prepare of one"
          f" line, {base['rss_mib']:.0f} MiB: the program, the tokenizer and the threads, outside the cap)" if base else "")
    rows = []
    for r in runs:
        above = r["rss_mib"] - base["rss_mib"] if base else None
        rows.append([NAMES[r["tokenizer"]], r["workers"], f"{r['mb']:.0f}", r["cap_mib"], f"{r['rss_mib']:.0f}",
                     f"{r['rss_mib'] / r['cap_mib']:.2f}", f"{above:.0f}" if base else "-",
                     f"{above / r['cap_mib']:.2f}" if base else "-", f"{r['mb'] / r['wall_s']:.1f}"])
    table(["tokenizer", "workers", "corpus MB", "cap MiB", "peak RSS MiB", "RSS/cap", "RSS - base", "(RSS - base)/cap",
           "MB/s"], rows)


def main():
    results = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    loads = [r["load"] for r in results if "load" in r]
    if loads:
        print(f"1-minute load average as the runs ended: {min(loads):.2f} to {max(loads):.2f}")
    if any(r["kind"] == "prepare" for r in results):
        prepare_table(results)
    if any(r["kind"] == "loader" for r in results):
        loader_table(results)
    if any(r["kind"] == "memory" for r in results):
        memory_table(results)


if __name__ == "__main__":
    main()
