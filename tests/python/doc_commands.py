# Runs the command blocks of the README and the docs as written (tests/e2e/test_docs_commands.sh).
# Every ```sh block of README.md, docs/*.md, examples/**/README.md and bench/README.md is a list of
# commands to paste; each runs, in order, in a sandbox laid out like a checkout (configs/, examples/,
# build/bin/, data/builtin, look-alikes of WikiText-2 and of MNIST's IDX files for /path/to/…), where
# build/bin/dtrain trains a tiny model for two steps (a tiny CNN when the config or a --set says
# model.kind = cnn, or a resumed run was one). Commands that need a cluster, several nodes or a GPU,
# that build or install (the two commands, the bundle), or that measure for minutes (benchmarks), or
# that read Fashion-MNIST where Debian's package is not installed (data/fashion-mnist is then made from
# the MNIST look-alike), or run PyTorch where the Python they name has none, are listed as skipped
# with the reason; a synopsis ([options]) in a command block is an error: such blocks are ```text.
# usage: doc_commands.py REPO BIN_DIR WORK_DIR
import gzip
import os
import random
import re
import shutil
import struct
import subprocess
import sys

REPO, BIN, WORK = (os.path.abspath(a) for a in sys.argv[1:4])
SANDBOX = os.path.join(WORK, "sandbox")
TINY = ("--set train.max_steps=2 --set train.epochs=1 --set model.dim=16 --set model.heads=2 --set model.layers=1 "
        "--set model.ff_dim=32 --set model.seq_len=8 --set train.batch_size=4 --set data.stride=8 "
        "--set train.threads=1 --set train.progress=false --set train.eval_max_batches=1")
# The same for an image classifier (model.kind = cnn: none of the language model's keys exist there).
TINY_CNN = ("--set train.max_steps=2 --set train.epochs=1 --set model.channels=4,8 --set model.hidden=16 "
            "--set train.batch_size=8 --set train.threads=1 --set train.progress=false --set train.eval_max_batches=1")

# Placeholders the docs write and what stands in for them here.
PLACEHOLDERS = [
    (r"--config C\b", "--config configs/quickstart.toml"),
    (r"/path/to/wikitext-2", os.path.join(SANDBOX, "wikitext-2-copy")),
    (r"/path/to/mnist", os.path.join(SANDBOX, "mnist-copy")),
]

FASHION_DIR = "/usr/share/datasets/fashion-mnist"
FASHION_MISSING = f"needs Debian's package dataset-fashion-mnist ({FASHION_DIR})"
TORCH_MISSING = "needs PyTorch (Debian's python3-torch)"

# (pattern, reason): a command is skipped when a pattern matches it, unless the machine has what the
# reason names (a GPU, Fashion-MNIST, PyTorch).
SKIPS = [
    (r"(^|\s)(srun|sbatch)\s", "needs a SLURM cluster (tests/e2e/test_slurm.sh runs the batch scripts on a private one)"),
    (r"--nnodes [2-9]|--node-rank", "needs several nodes (tests/e2e/test_two_nodes.sh runs two in network namespaces)"),
    (r"device=cuda|gpu_compare", "needs a GPU"),
    (r"fashion-mnist", FASHION_MISSING),
    (r"classify_with_pytorch\.py", TORCH_MISSING),
    (r"^scripts/test\.sh", "the test suite itself"),
    (r"^scripts/main\.sh", "the main job: installs and builds in the checkout (scripts/fresh-machine-check.sh "
                           "--command scripts/main.sh runs it on a new machine)"),
    (r"^scripts/bundle\.sh|^tar -xJf dtrain-|^bin/", "the bundle: scripts/fresh-machine-check.sh --bundle runs these "
                                                     "in a new root"),
    (r"^(scripts/build\.sh && )?bench/|^build/bin/bench_", "a benchmark: minutes of measurement (bench/README.md "
                                                            "quotes its figures)"),
    (r"dtrain plan --calibrate", "measures this machine (about 45 s): bench/plan.sh runs it"),
]


def blocks(path):
    """(line number, [logical lines]) of each ```sh block; errors for a synopsis inside one."""
    out, current, start, lang = [], None, 0, None
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        fence = re.match(r"^```(\w*)", line)
        if fence and current is None:
            current, start, lang = [], n, fence.group(1)
            continue
        if line.startswith("```") and current is not None:
            if lang in ("sh", "bash", "shell"):
                out.append((start, current))
            current = None
            continue
        if current is not None:
            current.append((n, line.rstrip("\n")))
    result = []
    for start, lines in out:
        logical, text, first = [], "", None
        for n, line in lines:
            if first is None:
                first = n
            if line.endswith("\\"):
                text += line[:-1] + " "
                continue
            text += line
            stripped = text.strip()
            if stripped and not stripped.startswith("#"):
                logical.append((first, stripped))
            text, first = "", None
        result.append((start, logical))
    return result


def doc_files():
    files = [os.path.join(REPO, "README.md")]
    files += sorted(os.path.join(REPO, "docs", f) for f in os.listdir(os.path.join(REPO, "docs")) if f.endswith(".md"))
    for root, _, names in sorted(os.walk(os.path.join(REPO, "examples"))):
        files += [os.path.join(root, n) for n in sorted(names) if n == "README.md"]
    files.append(os.path.join(REPO, "bench", "README.md"))
    return files


def make_sandbox():
    os.makedirs(os.path.join(SANDBOX, "build", "bin"))
    for d in ("configs", "examples"):
        shutil.copytree(os.path.join(REPO, d), os.path.join(SANDBOX, d))
    for name in os.listdir(BIN):  # the programs as built, but dtrain trains a tiny model
        if name != "dtrain":
            os.symlink(os.path.join(BIN, name), os.path.join(SANDBOX, "build", "bin", name))
    wrapper = os.path.join(SANDBOX, "build", "bin", "dtrain")
    with open(wrapper, "w") as f:
        f.write("#!/bin/bash\n# the real dtrain; `train` on a tiny model for two steps (the docs' own --set come after):\n"
                "# a tiny CNN when the config, a --set or the resumed run's config.json says model.kind = cnn\n"
                'if [ "$1" = train ]; then\n'
                f'  shift; tiny="{TINY}"; prev=""\n'
                '  for a in "$@"; do\n'
                '    case "$prev:$a" in\n'
                f'      --config:*) grep -Eq \'^[[:space:]]*kind[[:space:]]*=[[:space:]]*"cnn"\' "$a" 2>/dev/null && tiny="{TINY_CNN}" ;;\n'
                '      --resume:*) for c in "$a/config.json" "$a/../../config.json"; do\n'
                f'          grep -Eq \'"kind": *"cnn"\' "$c" 2>/dev/null && tiny="{TINY_CNN}"; done ;;\n'
                f'      *:model.kind=cnn) tiny="{TINY_CNN}" ;;\n'
                '    esac\n'
                '    prev="$a"\n'
                '  done\n'
                f'  exec {BIN}/dtrain train $tiny "$@"\n'
                'fi\n'
                f'exec {BIN}/dtrain "$@"\n')
    os.chmod(wrapper, 0o755)
    run("build/bin/dtrain data builtin --out data/builtin")
    # An MNIST look-alike: the four IDX files (images gzipped, labels plain), random pixels, labels 0-9,
    # enough train images for the default valid cut of 5000.
    make_idx(os.path.join(SANDBOX, "mnist-copy"), train=5200, test=200)
    if not os.path.isdir(FASHION_DIR):  # the docs' `dtrain data fashion-mnist` is skipped: its folder from the look-alike
        r = run("build/bin/dtrain data prepare --format idx --input mnist-copy --out data/fashion-mnist")
        if r.returncode != 0:
            sys.exit("FAIL: could not prepare the MNIST look-alike:\n" + r.stdout)
    # A WikiText-2 look-alike: its file names, made from the built-in corpus.
    text = open(os.path.join(SANDBOX, "data", "builtin", "text", sorted(os.listdir(
        os.path.join(SANDBOX, "data", "builtin", "text")))[0]), encoding="utf-8").read().split("\n")
    wt = os.path.join(SANDBOX, "wikitext-2-copy")
    os.makedirs(wt)
    for i, split in enumerate(("train", "valid", "test")):
        part = text[i * len(text) // 6:(i + 1) * len(text) // 6 + (len(text) // 2 if split == "train" else 0)]
        open(os.path.join(wt, f"wiki.{split}.tokens"), "w", encoding="utf-8").write("\n".join(part) + "\n")


def make_idx(folder, train, test):
    """MNIST-format files of random 28×28 images, seeded."""
    rng = random.Random(1)
    os.makedirs(folder)
    for split, n in (("train", train), ("t10k", test)):
        images = struct.pack(">IIII", 0x803, n, 28, 28) + rng.randbytes(n * 28 * 28)
        labels = struct.pack(">II", 0x801, n) + bytes(rng.randrange(10) for _ in range(n))
        with gzip.open(os.path.join(folder, f"{split}-images-idx3-ubyte.gz"), "wb") as f:
            f.write(images)
        with open(os.path.join(folder, f"{split}-labels-idx1-ubyte"), "wb") as f:
            f.write(labels)


def run(command):
    env = dict(os.environ, PATH=os.path.join(SANDBOX, "build", "bin") + ":" + os.environ["PATH"],
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    return subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=SANDBOX, env=env, timeout=600,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def main():
    make_sandbox()
    ran, skipped, failed = 0, 0, []
    for path in doc_files():
        rel = os.path.relpath(path, REPO)
        for start, commands in blocks(path):
            for line, command in commands:
                where = f"{rel}:{line}"
                if re.search(r"\[--|\[[a-z ]+\]|…", command):
                    failed.append(f"{where}: a synopsis in a command block (`{command}`): make the block ```text, "
                                  "or give the command real values")
                    continue
                reasons = [why for pat, why in SKIPS if re.search(pat, command)]
                if "needs a GPU" in reasons and shutil.which("nvidia-smi") and run("nvidia-smi -L").returncode == 0:
                    reasons.remove("needs a GPU")
                if FASHION_MISSING in reasons and os.path.isdir(FASHION_DIR):
                    reasons.remove(FASHION_MISSING)
                if TORCH_MISSING in reasons and run(f"{command.split()[0]} -c 'import torch'").returncode == 0:
                    reasons.remove(TORCH_MISSING)  # the Python the command names has PyTorch
                reason = reasons[0] if reasons else None
                if reason:
                    print(f"skip  {where}  {command[:90]}\n        ({reason})")
                    skipped += 1
                    continue
                real = command
                for pat, value in PLACEHOLDERS:
                    real = re.sub(pat, value, real)
                # Launch lines are alternatives: each starts with the default run dir free.
                if "dtrain train" in real and "--run-dir" not in real and "--resume" not in real:
                    shutil.rmtree(os.path.join(SANDBOX, "runs", "latest"), ignore_errors=True)
                r = run(real)
                if r.returncode != 0:
                    failed.append(f"{where}: `{command}` exited {r.returncode}:\n{r.stdout[-2000:]}")
                    print(f"FAIL  {where}  {command[:90]}")
                    continue
                print(f"ran   {where}  {command[:90]}")
                ran += 1
    print(f"{ran} commands ran, {skipped} skipped with the reason above")
    if failed:
        sys.exit("FAIL: commands of the docs that do not run as written:\n" + "\n".join(failed))
    if ran < 8:
        sys.exit(f"FAIL: only {ran} commands ran: the docs' command blocks were not found")


main()
