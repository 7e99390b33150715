"""How far a bf16 run's loss curve lies from the f32 run's, beside how far a perturbed f32 run's does
(bench/bf16_curve.sh): the runs' metrics.jsonl train records step by step, and their val records.
For each of the two against f32: the step losses' relative difference (median, largest), the same for
the mean loss of each window of --window steps (a loss curve with the batch-to-batch noise averaged
out), the first step from which they differ by more than 1e-3, and the validation losses."""
import argparse
import json
import statistics


def records(path, kind):
    out = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("type") == kind and "loss" in r:
                out[int(r["step"])] = float(r["loss"])
    return out


def window_means(curve, steps, w):
    return [(win[0], win[-1], sum(curve[s] for s in win) / w) for win in (steps[i:i + w] for i in
                                                                          range(0, len(steps) - w + 1, w))]


def against(name, ref, other, steps, w):
    rel = [abs(other[s] - ref[s]) / abs(ref[s]) for s in steps]
    apart = next((s for s, r in zip(steps, rel) if r > 1e-3), None)
    wr = [abs(o - f) / f for (_, _, f), (_, _, o) in zip(window_means(ref, steps, w), window_means(other, steps, w))]
    print(f"{name} against f32: step loss |diff| / f32 median {statistics.median(rel):.2e}, largest {max(rel):.2e}; "
          f"{w}-step means largest {max(wr):.2e}, last {wr[-1]:.2e}; apart by > 1e-3 from step "
          f"{apart if apart else 'never'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("f32")
    ap.add_argument("f32_split")
    ap.add_argument("bf16")
    ap.add_argument("--window", type=int, default=25)
    a = ap.parse_args()
    runs = {n: records(p, "train") for n, p in (("f32", a.f32), ("f32 split", a.f32_split), ("bf16", a.bf16))}
    steps = sorted(set(runs["f32"]) & set(runs["f32 split"]) & set(runs["bf16"]))
    if len(steps) < a.window:
        raise SystemExit("bf16_curve: too few train records in common: did the runs finish?")
    print(f"steps compared: {len(steps)} (1..{steps[-1]})")
    against("f32 split", runs["f32"], runs["f32 split"], steps, a.window)
    against("bf16     ", runs["f32"], runs["bf16"], steps, a.window)
    print(f"the curves, the mean loss of each {a.window} steps:   f32   f32 split   bf16")
    means = {n: window_means(c, steps, a.window) for n, c in runs.items()}
    for i, (first, last, f) in enumerate(means["f32"]):
        print(f"  {first:5d}-{last:<5d} {f:9.4f} {means['f32 split'][i][2]:9.4f} {means['bf16'][i][2]:9.4f}")
    vals = {n: records(p, "val") for n, p in (("f32", a.f32), ("f32 split", a.f32_split), ("bf16", a.bf16))}
    for s in sorted(set(vals["f32"]) & set(vals["f32 split"]) & set(vals["bf16"])):
        print(f"validation loss at step {s}: f32 {vals['f32'][s]:.4f}, f32 split {vals['f32 split'][s]:.4f}, "
              f"bf16 {vals['bf16'][s]:.4f}")


if __name__ == "__main__":
    main()
