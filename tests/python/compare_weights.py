# Compares two dtrain checkpoints tensor by tensor: the worst relative difference
# (max |a-b| / max |a| per tensor) must be within a tolerance. Used by the layout-equivalence tests.
# usage: compare_weights.py CKPT_A CKPT_B TOLERANCE LABEL
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402


def cpu_tolerance(tol):
    """On a CPU without avx512 (AVX2 only) oneDNN's f32 kernels block a product's sums by its shape, so
    a rank's share of the batch adds in another order than the whole batch, and Adam magnifies that in
    near-zero gradients (norm biases): up to 1.04e-4 after 30 steps measured on an AMD Zen 3. There a
    layout tolerance is at least 3e-4; an exact comparison (0) stays exact."""
    try:
        with open("/proc/cpuinfo") as f:
            avx512 = "avx512bw" in f.read().split()
    except OSError:
        avx512 = True
    return tol if tol == 0 or avx512 else max(tol, 3e-4)


def main():
    a_dir, b_dir, tol, label = sys.argv[1], sys.argv[2], cpu_tolerance(float(sys.argv[3])), sys.argv[4]
    a = safetensors_io.load(os.path.join(a_dir, "model.safetensors"))[0]
    b = safetensors_io.load(os.path.join(b_dir, "model.safetensors"))[0]
    if sorted(a) != sorted(b):
        sys.exit(f"FAIL: {label}: the checkpoints hold different tensors")
    worst, where = 0.0, ""
    for name in sorted(a):
        x, y = a[name].double(), b[name].double()
        scale = max(float(x.abs().max()), 1e-30)
        rel = float((x - y).abs().max()) / scale
        if rel > worst:
            worst, where = rel, name
    print(f"{label}: worst relative weight difference {worst:.2e} ({where}), tolerance {tol:.0e}")
    if not worst <= tol:
        sys.exit(f"FAIL: {label}: weights differ by {worst:.2e} > {tol:.0e} in {where}")


main()
