# Writes a made-up run dir with every record and summary key docs/watching.md defines (train with
# phases per rank, epoch, val, test, resource, checkpoint, checkpoint_written; summary.json with
# step_time and resources; config.json), for the tests of `dtrain report` and the scaling study.
# usage: synthetic_run.py DIR [--ranks R] [--steps N] [--scale F] [--no-resources] [--label TEXT]
#        synthetic_run.py --scaling-summary FILE --ranks R --tokens-per-s T --step-s S
import argparse
import json
import math
import os

PHASES = ["data", "forward", "backward", "optimizer", "comm", "checkpoint", "eval", "other"]


def phase_split(step_s, rank, ranks):
    comm = 0.0 if ranks == 1 else step_s * (0.08 + 0.02 * rank)
    rest = step_s - comm
    p = {"data": 0.01 * rest, "forward": 0.3 * rest, "backward": 0.55 * rest, "optimizer": 0.1 * rest,
         "comm": comm, "checkpoint": 0.0, "eval": 0.0, "other": 0.04 * rest}
    return p


def step_time(step_s, ranks, steps):
    by_rank = [{"mean_s": step_s * (1 + 0.01 * r), "phases": phase_split(step_s * (1 + 0.01 * r), r, ranks)}
               for r in range(ranks)]
    phases = {}
    for name in PHASES:
        means = [b["phases"][name] for b in by_rank]
        slowest = max(range(ranks), key=lambda r: means[r])
        phases[name] = {"mean_s": means[0], "share": means[0] / by_rank[0]["mean_s"],
                        "slowest_rank": slowest, "slowest_mean_s": means[slowest]}
    return {"warmup_steps": 1, "steps": steps - 1, "mean_s": by_rank[0]["mean_s"], "phases": phases,
            "by_rank": by_rank}


def write_run(d, ranks, steps, scale, resources, label):
    os.makedirs(d, exist_ok=True)
    recs = []
    step_s = 0.1 * scale
    tps = 40000 / scale
    for step in range(10, steps + 1, 10):
        loss = 6.0 * math.exp(-step / 80) + 3.0
        p = phase_split(step_s, 0, ranks)
        rec = {"type": "train", "step": step, "epoch": 1 + (step - 1) // 30, "loss": loss, "lr": 0.002,
               "grad_norm": 1.3, "tokens_per_s": tps, "samples_per_s": tps / 32, "tflops_per_rank": 0.9,
               "mfu": None, "step_seconds": step_s, "phases": p}
        if ranks > 1:
            rec["step_seconds_by_rank"] = [step_s * (1 + 0.01 * r) for r in range(ranks)]
            rec["phases_by_rank"] = [phase_split(step_s * (1 + 0.01 * r), r, ranks) for r in range(ranks)]
        recs.append(rec)
        if step % 30 == 0:
            recs.append({"type": "checkpoint", "step": step, "format": "sharded", "async": True,
                         "bytes": 12_000_000, "stall_seconds": 0.02 * step / 30})
            recs.append({"type": "checkpoint_written", "step": step, "write_seconds": 0.4})
            recs.append({"type": "epoch", "step": step, "epoch": step // 30, "train_loss": loss + 0.1,
                         "val_loss": loss + 0.3, "val_ppl": math.exp(loss + 0.3), "tokens_per_s": tps,
                         "epoch_seconds": 30 * step_s})
        if step % 20 == 0:
            recs.append({"type": "val", "step": step, "epoch": 1 + (step - 1) // 30, "loss": loss + 0.25,
                         "ppl": math.exp(loss + 0.25)})
        if resources:
            for r in range(ranks):
                recs.append({"type": "resource", "rank": r, "host": "node07", "step": step, "t": step * step_s,
                             "cpu_percent": 95.0 + r, "rss_mb": 300.0 + 40 * r + step * 0.1, "threads": 5,
                             "read_mb": 1.2, "write_mb": 30.4})
    final = 6.0 * math.exp(-steps / 80) + 3.0
    recs.append({"type": "test", "step": steps, "epoch": 1 + (steps - 1) // 30, "loss": final + 0.35,
                 "ppl": math.exp(final + 0.35)})
    with open(os.path.join(d, "metrics.jsonl"), "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
    summary = {"test_loss": final + 0.35, "test_ppl": math.exp(final + 0.35), "best_val_loss": final + 0.3,
               "steps": steps, "train_tokens_per_s": tps * 0.95, "peak_rss_mb": 300.0 + 40 * (ranks - 1),
               "peak_rss_rank": ranks - 1, "device": "cpu", "threads": 1, "world_size": ranks, "dp_size": ranks,
               "precision": "f32", "model_kind": "transformer", "parameters": 123456,
               "step_time": step_time(step_s, ranks, steps), "steady_tokens_per_s": tps,
               "tflops_per_rank": 0.9, "mfu": None, "peak_tflops": None}
    if resources:
        summary["resources"] = {"samples": steps // 10 * ranks, "max": {
            "cpu_percent": {"value": 95.0 + ranks - 1, "rank": ranks - 1},
            "rss_mb": {"value": 300.0 + 40 * (ranks - 1) + steps * 0.1, "rank": ranks - 1},
            "threads": {"value": 5, "rank": 0}, "read_mb": {"value": 1.2, "rank": 0},
            "write_mb": {"value": 30.4, "rank": 0}}}
    with open(os.path.join(d, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    config = {"data": {"dir": "data/<builtin> & more", "stride": 2},
              "train": {"epochs": 0, "max_steps": steps, "batch_size": 8, "device": "cpu", "note": label},
              "model": {"kind": "transformer", "dim": 32}}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", nargs="?")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--no-resources", action="store_true")
    ap.add_argument("--label", default="")
    ap.add_argument("--scaling-summary")
    ap.add_argument("--tokens-per-s", type=float)
    ap.add_argument("--step-s", type=float)
    a = ap.parse_args()
    if a.scaling_summary:  # only what the scaling study reads
        s = {"world_size": a.ranks, "steady_tokens_per_s": a.tokens_per_s,
             "step_time": step_time(a.step_s, a.ranks, 20)}
        with open(a.scaling_summary, "w") as f:
            json.dump(s, f, indent=2)
        return
    write_run(a.dir, a.ranks, a.steps, a.scale, not a.no_resources, a.label)


if __name__ == "__main__":
    main()
