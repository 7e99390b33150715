#!/usr/bin/env bash
# Installs everything dtrain needs on Debian 12 from Debian's packages (root or sudo).
# Build: g++, CMake, oneDNN (its CMake package also needs the OpenCL headers and loader, only a
# Recommends of libdnnl-dev, so named here), toml++, nlohmann-json, Gloo (collectives), OpenMPI's
# headers and library (libopenmpi-dev: the MPI backend plugin, parallel.backend = mpi), zlib (gzip-
# compressed IDX image files), GoogleTest, Google Benchmark. Data: Fashion-MNIST (`dtrain data
# fashion-mnist`). Tests:
# PyTorch (python3-torch, the parity reference), python3-h5py, python3-sentencepiece and zstd (the inputs
# and tokenizer of test_prepare_shards), protobuf-compiler (decodes TensorBoard files),
# OpenMPI (mpirun: launch and the MPI backend), SLURM + munge (a private cluster on loopback; its
# PMIx plugin runs srun --mpi=pmix), iproute2 (two "nodes" in network namespaces), procps, Node.js
# and npm (the byte-level BPE references of tests/parity: tiktoken and tokenizers.js from npm).
# Benchmarks: OpenBLAS, so that PyTorch's f32 baseline is not measured on the slow reference BLAS.
set -euo pipefail
packages=(g++ cmake make pkg-config libdnnl-dev ocl-icd-opencl-dev libtomlplusplus-dev nlohmann-json3-dev libgloo-dev
          libsentencepiece-dev libpcre2-dev libzstd-dev libhdf5-dev
          libopenmpi-dev zlib1g-dev dataset-fashion-mnist libgtest-dev libbenchmark-dev
          python3 python3-torch python3-numpy python3-sentencepiece python3-h5py zstd protobuf-compiler
          libopenblas0-pthread openmpi-bin slurm-wlm munge iproute2 procps nodejs npm)
# npm is also inside other Node.js builds (NodeSource's nodejs package ships it and conflicts with
# Debian's npm): an npm command already on the PATH counts as the package.
provided_by_command() { [ "$1" = npm ] && command -v npm >/dev/null 2>&1; }
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" && continue
  provided_by_command "$p" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
