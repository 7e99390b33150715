# An exported checkpoint (dtrain ckpt export: FILE.safetensors + FILE.config.json) loaded into the PyTorch
# reference gives the logits dtrain computed for the same batch from the same checkpoint
# (dtrain debug dump with train.init_from): both sides read the exported weights independently.
# With --loader safetensors the file is read by the safetensors package's own reader
# (safetensors.torch.load_file, the real client) instead of the tests' one.
# usage: check_export.py EXPORTED.safetensors CONFIG.json DUMP_DIR TOLERANCE [--loader ours|safetensors]
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402
import torch  # noqa: E402
from reference_model import ReferenceLM  # noqa: E402


def main():
    exported, config, dump, tol = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    loader = sys.argv[6] if len(sys.argv) > 6 and sys.argv[5] == "--loader" else "ours"
    if loader == "safetensors":
        from safetensors.torch import load_file
        weights = load_file(exported)
    else:
        weights, _ = safetensors_io.load(exported)
    model = ReferenceLM(json.load(open(config))).float()
    model.load_weights({k: v.float() for k, v in weights.items()})
    model.eval()
    batch, _ = safetensors_io.load(os.path.join(dump, "batch.safetensors"))
    got, _ = safetensors_io.load(os.path.join(dump, "dtrain.safetensors"))
    with torch.no_grad():
        logits, _ = model(batch["inputs"][0].long())
    want = got["logits"]
    diff = float((logits - want).abs().max()) / max(float(want.abs().max()), 1e-30)
    print(f"exported weights in PyTorch (read by {loader}'s reader): logits {list(logits.shape)}, worst relative difference {diff:.2e} "
          f"(tolerance {tol:.0e})")
    if not diff <= tol:
        sys.exit(f"FAIL: PyTorch's logits from the exported file differ from dtrain's by {diff:.2e}")


main()
