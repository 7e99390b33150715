# Compares runs' loss trajectories (metrics.jsonl): every logged step loss and the last validation
# loss of RUN within a relative tolerance of REF's, with STEPS steps logged by both. Used by the
# layout-equivalence tests.
# usage: compare_losses.py WORK_DIR STEPS REF:RUN:TOLERANCE ...
import json
import sys


def losses(work, name):
    recs = [json.loads(line) for line in open(f"{work}/{name}/metrics.jsonl")]
    return [r["loss"] for r in recs if r["type"] == "train"], [r["val_loss"] for r in recs if r["type"] == "epoch"]


def main():
    work, steps = sys.argv[1], int(sys.argv[2])
    for spec in sys.argv[3:]:
        ref, name, tol = spec.split(":")
        tol = float(tol)
        base, base_val = losses(work, ref)
        tr, val = losses(work, name)
        if len(base) != steps or len(tr) != steps or not val:
            sys.exit(f"FAIL: {ref}/{name} logged {len(base)}/{len(tr)} steps and {len(val)} evaluations")
        worst = max(abs(a - b) / abs(a) for a, b in zip(base, tr))
        print(f"{name}: worst relative step-loss difference {worst:.1e} (tolerance {tol:.0e}); "
              f"val {val[-1]:.6f} vs {ref}'s {base_val[-1]:.6f}")
        if worst > tol:
            sys.exit(f"FAIL: {name} step losses differ from {ref}'s by {worst:.1e} > {tol:.0e}")
        if abs(val[-1] - base_val[-1]) > tol * abs(base_val[-1]):
            sys.exit(f"FAIL: {name} validation loss {val[-1]} differs from {ref}'s {base_val[-1]}")


main()
