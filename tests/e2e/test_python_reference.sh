#!/usr/bin/env bash
# The PyTorch reference and the parity checker test themselves (reference == nn.TransformerEncoder,
# parity.py passes on exact dumps and fails on perturbed ones).
set -euo pipefail
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 has no torch (install python3-torch)"; exit 77
fi
/usr/bin/python3 "$2/tests/python/test_reference_selfcheck.py"
