#!/usr/bin/env bash
# Makes dist/dtrain-VERSION-linux-x86_64.tar.xz, to run dtrain where nothing can be installed: the
# programs and every non-system shared library they need, found through an $ORIGIN run path.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/bundle.sh [--build-dir DIR] [--out DIR] [CMake -D options...]

Configures and builds dtrain in DIR (default build/, as scripts/build.sh does, with the tests and
benchmarks) with a run path of $ORIGIN/../lib, then packs OUT/dtrain-VERSION-linux-x86_64.tar.xz
(default OUT: dist/) with
  bin/      dtrain, dtrun, the test and benchmark programs
  lib/      the shared libraries they need from Debian (oneDNN, Gloo, toml++, OpenMP, the OpenCL
            loader, libstdc++, ...), not glibc's and not CUDA's or NVIDIA's (the node provides them);
            when the build machine has the CUDA toolkit, the CUDA backend libdtrain_cuda.so; when it
            has libopenmpi-dev, the MPI backend libdtrain_mpi.so (without libmpi: parallel.backend=mpi
            uses the node's OpenMPI, whose mpirun or srun --mpi=pmix starts the ranks)
  configs/  the presets; README, VERSION
The programs link no CUDA library: they open libdtrain_cuda.so only when a CUDA device is asked for,
so one bundle serves CPU nodes and GPU nodes (which provide the CUDA libraries). It runs on any
x86_64 Linux with a recent enough glibc (the README in the bundle says which).
Check a bundle on a fresh Debian 12 root: scripts/fresh-machine-check.sh --bundle FILE
EOF
}

die() { echo "bundle: error: $*" >&2; exit 2; }

repo=$(cd "$(dirname "$0")/.." && pwd)
build_dir=$repo/build
out_dir=$repo/dist
cmake_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) [ $# -ge 2 ] || die "--build-dir needs a folder"; build_dir=$2; shift ;;
    --out) [ $# -ge 2 ] || die "--out needs a folder"; out_dir=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    -D*) cmake_args+=("$1") ;;
    *) die "unknown argument '$1': give --build-dir, --out or CMake -D options (see --help)" ;;
  esac
  shift
done
# Folders given are relative to where the script is called from; the defaults to the repository.
build_dir=$(realpath -m "$build_dir")
out_dir=$(realpath -m "$out_dir")
cd "$repo"
for tool in cmake ldd readelf objdump tar xz; do
  command -v "$tool" >/dev/null || die "$tool is missing: run scripts/install-deps.sh (and apt-get install xz-utils)"
done

# Link every program with the run path $ORIGIN/../lib, written as DT_RPATH (not the newer
# DT_RUNPATH): the loader then also uses it for the libraries' own dependencies (oneDNN's OpenCL
# loader, Gloo's libibverbs, ...), so the Debian libraries are bundled unchanged.
echo "bundle: building in $build_dir"
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DDTRAIN_TESTS=ON -DDTRAIN_BENCH=ON \
  '-DCMAKE_BUILD_RPATH=$ORIGIN/../lib' -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags \
  -DCMAKE_MODULE_LINKER_FLAGS=-Wl,--disable-new-dtags \
  "${cmake_args[@]}" >/dev/null
cmake --build "$build_dir" -j"$(nproc)"

version=$(git describe --tags --always --dirty 2>/dev/null || echo unknown)
name=dtrain-$version-linux-x86_64
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/$name/bin" "$stage/$name/lib"

# The programs: the build's executable targets (not stale files of removed ones) found in bin/.
targets=$(cmake --build "$build_dir" --target help | sed -E 's/^\.\.\. //; s/[: ].*$//')
programs=()
for t in $targets; do
  [ -f "$build_dir/bin/$t" ] && [ -x "$build_dir/bin/$t" ] && programs+=("$build_dir/bin/$t")
done
[ ${#programs[@]} -gt 0 ] || die "no programs in $build_dir/bin after the build"
for p in "${programs[@]}"; do
  readelf -d "$p" | grep -q '(RPATH).*\$ORIGIN/\.\./lib' ||
    die "$p has no RPATH \$ORIGIN/../lib: CMAKE_EXE_LINKER_FLAGS or CMAKE_BUILD_RPATH given differently? use another --build-dir"
  cp "$p" "$stage/$name/bin/"
done

# The CUDA backend plugin (built when the toolkit was there): in lib/, where the programs look.
scanned=("${programs[@]}")
if [ -f "$build_dir/lib/libdtrain_cuda.so" ]; then
  cp "$build_dir/lib/libdtrain_cuda.so" "$stage/$name/lib/"
  scanned+=("$build_dir/lib/libdtrain_cuda.so")
fi

# The MPI backend plugin (built when libopenmpi-dev was there): in lib/, without libmpi and the
# libraries it brings, which are the node's (its OpenMPI goes with its mpirun). Its other needs are
# the programs' own (libstdc++, bundled below) or glibc's.
mpi_plugin=""
if [ -f "$build_dir/lib/libdtrain_mpi.so" ]; then
  cp "$build_dir/lib/libdtrain_mpi.so" "$stage/$name/lib/"
  mpi_plugin=$stage/$name/lib/libdtrain_mpi.so
fi

# The libraries, by the name the programs ask for (the soname), as the real file.
system='^(linux-vdso|ld-linux-x86-64|libc|libm|libmvec|libpthread|libdl|librt|libresolv|libutil|libanl|libBrokenLocale)\.so'
node='^lib(cuda|cudart|cublas|cudnn|cufft|curand|cusolver|cusparse|nccl|nvrtc|nvJitLink|nvToolsExt|nvidia)'
declare -A from_node=()
while read -r soname arrow path _; do
  [[ $soname =~ $system ]] && continue
  if [[ $soname =~ $node ]]; then from_node[$soname]=1; continue; fi
  [ "$arrow" = "=>" ] && [ -f "$path" ] || die "the programs need $soname, not found here: run scripts/install-deps.sh"
  [ -f "$stage/$name/lib/$soname" ] || cp -L "$path" "$stage/$name/lib/$soname"
done < <(for p in "${scanned[@]}"; do ldd "$p"; done | grep '=>' | sort -u)

if [ -n "$mpi_plugin" ]; then
  for soname in $(readelf -d "$mpi_plugin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    [[ $soname =~ ^libmpi\.so ]] || [[ $soname =~ $system ]] || [ -f "$stage/$name/lib/$soname" ] ||
      die "libdtrain_mpi.so needs $soname, which the programs do not bring: bundle it too"
  done
fi

# Every bundled library must resolve inside the bundle, for the programs and for each other.
for p in "$stage/$name"/bin/* "$stage/$name"/lib/libdtrain_cuda.so; do
  [ -f "$p" ] || continue
  ldd "$p" | while read -r soname arrow path _; do
    if [ -f "$stage/$name/lib/$soname" ] && [ "$(realpath "$path")" != "$stage/$name/lib/$soname" ]; then
      die "$(basename "$p") finds $soname at $path, not in the bundle's lib/"
    fi
  done
done

glibc=$(for f in "$stage/$name"/bin/* "$stage/$name"/lib/*; do objdump -T "$f"; done |
        grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -Vu | tail -n1)
node_libs=""
[ ${#from_node[@]} -eq 0 ] || node_libs=$(printf '%s\n' "${!from_node[@]}" | sort | paste -sd' ')
cp -r configs "$stage/$name/"
echo "$version" > "$stage/$name/VERSION"
echo "$node_libs" > "$stage/$name/NODE_LIBS"  # what GPU nodes provide, for scripts (gpu-check.sh)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
cat > "$stage/$name/README" <<EOF
dtrain $version for x86_64 Linux, built from commit $commit on $(. /etc/os-release && echo "$PRETTY_NAME").
It runs without installing anything: it needs glibc $glibc or newer${node_libs:+; on GPU nodes
(device=cuda) also $node_libs from the node (if they are not found, dtrain names the
library: add its folder to LD_LIBRARY_PATH). CPU nodes need none of them}.${mpi_plugin:+
parallel.backend=mpi uses the node's OpenMPI (libmpi.so.40 on the loader's path or LD_LIBRARY_PATH,
and its mpirun, or srun --mpi=pmix); nothing else does.}

  bin/      dtrain, dtrun, the test and benchmark programs
  lib/      the libraries they load, found through the run path \$ORIGIN/../lib before the node's
  configs/  the presets

From this folder (or by the programs' full paths from anywhere):

  bin/dtrain data builtin --out data/builtin    # the built-in corpus, from /usr/share/common-licenses
  bin/dtrain train --config configs/quickstart.toml --run-dir runs/quickstart
  bin/dtrun --standalone --nproc-per-node 4 bin/dtrain train --config configs/quickstart.toml
  srun /path/to/bin/dtrain train --config C      # in an sbatch script: every task is a rank

The source tree's README has the rest (WikiText-2, many nodes, GPUs, every option).
EOF

mkdir -p "$out_dir"
tarball=$out_dir/$name.tar.xz
XZ_OPT=-T0 tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner -cJf "$tarball" "$name"
echo "bundle: $tarball ($(du -h "$tarball" | cut -f1)): ${#programs[@]} programs;" \
     "lib/: $(ls "$stage/$name/lib" | tr '\n' ' ')"
[ -z "$node_libs" ] || echo "bundle: GPU nodes (device=cuda) must provide $node_libs (CUDA, NVIDIA); CPU nodes need none"
[ -z "$mpi_plugin" ] || echo "bundle: parallel.backend=mpi needs the node's OpenMPI (libmpi.so.40, mpirun or srun --mpi=pmix)"
echo "bundle: needs glibc $glibc or newer; check it: scripts/fresh-machine-check.sh --bundle $tarball"
