#!/usr/bin/python3
# PyTorch parity check of a `dtrain debug dump` folder: same weights and batch through the
# reference model of its kind (tests/python/reference_model.py; llama_reference.py for
# model.kind = llama, moe_reference.py for model.kind = moe, cnn_reference.py for model.kind = cnn) -> compare logits, loss, gradients and an
# AdamW loss trajectory. Usage: parity.py DIR [--rtol 1e-4] [--loss-tol 1e-4 (relative)]; exit 0 = pass.
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import safetensors_io  # noqa: E402
from cnn_reference import ReferenceCNN  # noqa: E402
from llama_reference import ReferenceLlama  # noqa: E402
from moe_reference import ReferenceMoE  # noqa: E402
from reference_model import ReferenceLM, adamw_losses  # noqa: E402

OPTIM_KEYS = ("lr", "beta1", "beta2", "eps", "weight_decay", "steps")


class ParityInputError(Exception):
    pass


def rel_error(got, ref):
    """max|got - ref| / max(max|ref|, 1e-30), in float64; NaN/inf anywhere -> inf."""
    got = got.detach().to(torch.float64)
    ref = ref.detach().to(torch.float64)
    if not (torch.isfinite(got).all() and torch.isfinite(ref).all()):
        return math.inf
    if got.numel() == 0:
        return 0.0
    diff = (got - ref).abs().max().item()
    scale = max(ref.abs().max().item(), 1e-30)
    return diff / scale


def _load(path):
    if not os.path.isfile(path):
        raise ParityInputError(f"{path} not found (run `dtrain debug dump` into this folder first)")
    try:
        return safetensors_io.load(path)
    except ValueError as e:
        raise ParityInputError(str(e)) from None


def load_dump(folder):
    weights, meta = _load(os.path.join(folder, "weights.safetensors"))
    batch, _ = _load(os.path.join(folder, "batch.safetensors"))
    got, _ = _load(os.path.join(folder, "dtrain.safetensors"))
    if "dtrain.model" not in meta:
        raise ParityInputError("weights.safetensors: metadata key 'dtrain.model' is missing")
    try:
        config = json.loads(meta["dtrain.model"])
    except json.JSONDecodeError as e:
        raise ParityInputError(f"weights.safetensors: 'dtrain.model' is not JSON: {e}") from None
    if not isinstance(config, dict):
        raise ParityInputError("weights.safetensors: 'dtrain.model' is not a JSON object")
    missing = [k for k in OPTIM_KEYS if k not in meta]
    if missing:
        raise ParityInputError(f"weights.safetensors: metadata keys {missing} are missing")
    try:
        opt = {k: float(meta[k]) for k in OPTIM_KEYS}
    except ValueError as e:
        raise ParityInputError(f"weights.safetensors: optimizer metadata is not numeric: {e}") from None
    if opt["steps"] != int(opt["steps"]) or opt["steps"] < 0:
        raise ParityInputError(f"weights.safetensors: steps = {meta['steps']!r} is not a count")
    opt["steps"] = int(opt["steps"])
    for k in ("inputs", "targets"):
        if k not in batch:
            raise ParityInputError(f"batch.safetensors: tensor '{k}' is missing")
        if batch[k].dim() != 3:
            raise ParityInputError(f"batch.safetensors: '{k}' has shape {list(batch[k].shape)}, "
                                   "expected [S, B, T]")
    if batch["inputs"].shape[:2] != batch["targets"].shape[:2]:
        raise ParityInputError("batch.safetensors: inputs and targets differ in steps or batch size")
    for k in ("logits", "loss", "losses"):
        if k not in got:
            raise ParityInputError(f"dtrain.safetensors: tensor '{k}' is missing")
    return weights, config, opt, batch, got


def run(folder, rtol, loss_tol, out=print):
    """Returns (ok, list of failure strings). Prints one line per compared group."""
    torch.set_num_threads(2)
    weights, config, opt, batch, got = load_dump(folder)
    try:
        reference = {"llama": ReferenceLlama, "moe": ReferenceMoE, "cnn": ReferenceCNN}.get(config.get("kind"), ReferenceLM)
        model = reference(config).float()
    except ValueError as e:
        raise ParityInputError(f"weights.safetensors: 'dtrain.model': {e}") from None
    if model.unknown_keys:
        out(f"note: model config keys not in docs/model.md ignored: {model.unknown_keys}")
    if model.missing_keys:
        out(f"note: model config keys missing, seed defaults used: {model.missing_keys}")
    try:
        model.load_weights({k: v.float() for k, v in weights.items()})
    except ValueError as e:
        raise ParityInputError(f"weights.safetensors: {e}") from None
    model.eval()  # dropout off for every comparison

    S = opt["steps"]
    images = config.get("kind") == "cnn"
    inputs, targets = (batch["inputs"].float() if images else batch["inputs"].long()), batch["targets"].long()
    if inputs.shape[0] < max(S, 1):
        raise ParityInputError(f"batch.safetensors: {inputs.shape[0]} batches for {S} steps")
    if images:
        V = model.config["classes"]
        checked = (("targets", targets),)
    else:
        V, Tmax = model.config["vocab_size"], model.config["seq_len"]
        if inputs.shape[2] > Tmax:
            raise ParityInputError(f"batch.safetensors: T = {inputs.shape[2]} exceeds seq_len {Tmax}")
        checked = (("inputs", inputs), ("targets", targets))
    for k, t in checked:
        if t.numel() and (t.min() < 0 or t.max() >= V):
            raise ParityInputError(f"batch.safetensors: {k} has ids outside [0, {V})")

    failures = []  # (severity = error/tol, message)

    def check(group, items, tol, what="rel"):
        """items: list of (name, error). One line per group; records failures."""
        if not items:
            out(f"{group:<8} (nothing compared)")
            return
        worst_name, worst = max(items, key=lambda it: (math.isnan(it[1]), it[1]))
        nbad = sum(1 for _, e in items if not e <= tol)
        status = "ok" if nbad == 0 else f"FAIL ({nbad} of {len(items)} over tolerance)"
        out(f"{group:<8} worst {worst_name} {what} {worst:.3e} (tol {tol:.0e}, "
            f"{len(items)} compared) {status}")
        if nbad:
            failures.append((worst / tol if tol > 0 else math.inf,
                             f"{group}: {worst_name} {what} {worst:.3e} > {tol:.0e}"))

    def shape_ok(name, a, b):
        if tuple(a.shape) != tuple(b.shape):
            failures.append((math.inf, f"{name}: dtrain shape {list(a.shape)} vs torch {list(b.shape)}"))
            out(f"{name}: shape mismatch, dtrain {list(a.shape)} vs torch {list(b.shape)}")
            return False
        return True

    # 1. logits, loss and gradients on batch 0 with the initial weights.
    model.zero_grad(set_to_none=True)
    logits, loss = model(inputs[0], targets[0])
    loss.backward()
    if shape_ok("logits", got["logits"], logits):
        check("logits", [("logits", rel_error(got["logits"], logits))], rtol)
    ref_loss = getattr(model, "reported_loss", loss).detach().reshape(1)
    if shape_ok("loss", got["loss"].reshape(-1), ref_loss):
        check("loss", [("loss", rel_error(got["loss"].reshape(-1), ref_loss))], rtol)
    if "aux_loss" in got:  # a mixture of experts: the balance losses' weighted share of the loss
        ref_aux = (model.config["aux_loss_coef"] * model.aux_loss).detach().reshape(1)
        check("aux loss", [("aux_loss", rel_error(got["aux_loss"].reshape(-1), ref_aux))], rtol)
    grad_items = []
    for name, p in model.named_parameters():
        key = "grad." + name
        if key not in got:
            failures.append((math.inf, f"grads: {key} missing from dtrain.safetensors"))
            out(f"grads    {key} missing from dtrain.safetensors")
            continue
        ref = p.grad if p.grad is not None else torch.zeros_like(p)
        if shape_ok(key, got[key], ref):
            grad_items.append((key, rel_error(got[key], ref)))
    extra = sorted(k for k in got if k.startswith("grad.") and k[5:] not in dict(model.named_parameters()))
    if extra:
        failures.append((math.inf, f"grads: dtrain has gradients for unknown parameters {extra}"))
        out(f"grads    unknown gradient tensors in dtrain.safetensors: {extra}")
    check("grads", grad_items, rtol)

    # 2. S AdamW steps from the initial weights; loss of step s measured before its update.
    model.load_weights({k: v.float() for k, v in weights.items()})
    ref_losses = torch.tensor(adamw_losses(model, inputs[:S], targets[:S], opt), dtype=torch.float64)
    dl = got["losses"].reshape(-1).to(torch.float64)
    if dl.numel() != S:
        failures.append((math.inf, f"losses: dtrain has {dl.numel()} step losses, steps = {S}"))
        out(f"losses   dtrain has {dl.numel()} step losses, metadata steps = {S}")
    else:
        items = []
        for s in range(S):
            # relative to the loss: 20 steps of AdamW at lr 2e-3 amplify f32 rounding chaotically
            # (torch f32 itself drifts ~3e-5 from torch f64 here), so an absolute bound would
            # test the chaos, not the implementation
            d = abs(dl[s].item() - ref_losses[s].item()) / max(abs(ref_losses[s].item()), 1e-30)
            items.append((f"step {s} (dtrain {dl[s].item():.6f} torch {ref_losses[s].item():.6f})",
                          d if math.isfinite(d) else math.inf))
        check("losses", items, loss_tol, what="rel diff")

    return failures


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__ or "dtrain vs PyTorch parity")
    ap.add_argument("dir", help="folder written by `dtrain debug dump`")
    ap.add_argument("--rtol", type=float, default=1e-4, help="max relative error of logits/loss/grads")
    ap.add_argument("--loss-tol", type=float, default=1e-4, help="max |diff| / |torch loss| of each step's loss")
    args = ap.parse_args(argv)
    try:
        failures = run(args.dir, args.rtol, args.loss_tol)
    except ParityInputError as e:
        print(f"PARITY FAIL: {e}")
        return 1
    if failures:
        failures.sort(key=lambda f: f[0], reverse=True)
        print(f"PARITY FAIL: {failures[0][1]}" + (f" (+{len(failures) - 1} more)" if len(failures) > 1 else ""))
        return 1
    print("PARITY OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
