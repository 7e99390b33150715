#!/usr/bin/env bash
# Tries dtrain as a new user would: in a brand-new minimal Debian 12 root (mmdebstrap, chroot), runs
# the README's test command on a clone of the committed HEAD, or trains with a bundle (--bundle).
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/fresh-machine-check.sh [--keep] [--root DIR] [--command CMD] [--bundle FILE]

Makes a minimal Debian 12 root with mmdebstrap from this machine's own apt sources, makes it look
like an installed machine (its own hostname, named in /etc/hosts; /proc, /sys, /dev; the root a
mount point so that `ip netns` works) and runs, as root in it with chroot:

  (default)      the README's test command, scripts/test.sh, in a clone of this repository's
                 committed HEAD at /root/dtrain (uncommitted changes are not in it)
  --bundle FILE  no clone, nothing installed: FILE (made by scripts/bundle.sh) is unpacked in /opt
                 and its programs make the built-in corpus and train the quickstart model, on one
                 process and with dtrun on two
  --command CMD  runs CMD (bash) instead, in the clone (or the unpacked bundle); e.g.
                 --command scripts/install-deps.sh
  --root DIR     makes the root in DIR (missing or empty), or reuses a root that this script left
                 there with --keep (then the clone is brought to HEAD, its build/ kept)
  --keep         keeps the root afterwards (default: removed)

Needs root (mmdebstrap, mount, chroot) and the network to the Debian mirror. Every mount is made in
a private mount namespace, so none is left behind, however the check ends. The test suite takes
15-25 minutes on 2 cores: too slow for CI, run it before resolving an issue.
EOF
}

die() { echo "fresh-machine-check: error: $*" >&2; exit 2; }
say() { echo "fresh-machine-check: $*"; }

repo=$(cd "$(dirname "$0")/.." && pwd)
marker=.dtrain-fresh-root  # in a root this script made: the only kind it reuses or removes

# --- Inside the namespaces (mount, UTS, PID) that the outer part below starts --------------------
if [ "${1-}" = "--inside-namespace" ]; then
  root=$FRESH_ROOT
  if [ ! -f "$root/$marker" ]; then
    say "making a minimal Debian 12 root in $root (mmdebstrap, about a minute)"
    sources=/etc/apt/sources.list.d/debian.sources
    [ -f "$sources" ] || sources=/etc/apt/sources.list
    mmdebstrap --quiet --variant=minbase bookworm "$root" - < "$sources"
    touch "$root/$marker"
  fi

  if [ -n "$FRESH_BUNDLE" ]; then
    top=$(tar -tJf "$FRESH_BUNDLE" | awk -F/ 'NR == 1 { print $1 }')
    [ -n "$top" ] || die "$FRESH_BUNDLE lists no files: make it again with scripts/bundle.sh"
    rm -rf --one-file-system "${root:?}/opt/$top"
    tar -xJf "$FRESH_BUNDLE" -C "$root/opt"
    workdir=/opt/$top
    say "unpacked $(basename "$FRESH_BUNDLE") in $workdir; nothing installed in the root"
  else
    workdir=/root/dtrain
    if [ -d "$root$workdir/.git" ]; then  # a kept root: bring its clone to HEAD, keep its build/
      git -C "$root$workdir" fetch --quiet "$repo" HEAD
      git -C "$root$workdir" reset --quiet --hard FETCH_HEAD
      git -C "$root$workdir" clean -fdq
    else
      git clone --quiet --no-hardlinks "$repo" "$root$workdir"
    fi
    say "cloned $(git -C "$root$workdir" rev-parse --short HEAD) to $workdir"
  fi

  # Look like an installed machine: a hostname of its own that /etc/hosts names, the host's DNS.
  echo "$FRESH_HOSTNAME" > "$root/etc/hostname"
  cat > "$root/etc/hosts" <<EOF
127.0.0.1	localhost
127.0.1.1	$FRESH_HOSTNAME
::1	localhost ip6-localhost ip6-loopback
ff02::1	ip6-allnodes
ff02::2	ip6-allrouters
EOF
  [ ! -e /etc/resolv.conf ] || cp -L /etc/resolv.conf "$root/etc/resolv.conf"
  hostname "$FRESH_HOSTNAME"

  # This mount namespace is private (unshare's default): none of these is seen by the host, and
  # the kernel removes any left when the last process in the namespace ends; the trap unmounts
  # them in reverse order first (lazily when a process still holds one).
  mounted=()
  mnt() { mount "$@"; mounted+=("${*: -1}"); }
  unmount_all() {
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
      umount -R "${mounted[i]}" 2>/dev/null || umount -R -l "${mounted[i]}" || true
    done
  }
  trap unmount_all EXIT
  mnt --bind "$root" "$root"      # the root a mount point, as / is: `ip netns` needs it
  mnt -t proc proc "$root/proc"   # this PID namespace's processes
  mnt --rbind /sys "$root/sys"
  mnt --rbind /dev "$root/dev"
  mnt -t tmpfs -o nosuid,nodev,mode=1777 tmpfs "$root/dev/shm"  # not the host's

  say "running in the root (hostname $FRESH_HOSTNAME): $FRESH_WHAT"
  env_vars=(HOME=/root USER=root LOGNAME=root SHELL=/bin/bash "TERM=${TERM:-dumb}"
            PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
  for v in http_proxy https_proxy no_proxy; do
    [ -z "${!v-}" ] || env_vars+=("$v=${!v}")
  done
  # Like the proxy variables, this machine's way out: where node is told to trust extra certificate
  # authorities (an intercepting egress proxy's), npm in the root trusts them too (tests/parity's
  # packages); nothing is installed into the root's own trust store.
  if [ -n "${NODE_EXTRA_CA_CERTS-}" ] && [ -f "$NODE_EXTRA_CA_CERTS" ]; then
    cp "$NODE_EXTRA_CA_CERTS" "$root/etc/fresh-check-host-ca.crt"
    env_vars+=(NODE_EXTRA_CA_CERTS=/etc/fresh-check-host-ca.crt)
  fi
  set +e
  chroot "$root" /usr/bin/env -i "${env_vars[@]}" /bin/bash -c "cd '$workdir' && $FRESH_COMMAND"
  rc=$?
  exit $rc
fi

# --- Outside: options, the namespaces, and the clean-up ------------------------------------------
keep=0; root=""; command=""; bundle=""; what=""
while [ $# -gt 0 ]; do
  case "$1" in
    --keep) keep=1 ;;
    --root) [ $# -ge 2 ] || die "--root needs a folder"; root=$2; shift ;;
    --command) [ $# -ge 2 ] || die "--command needs a command line"; command=$2; shift ;;
    --bundle) [ $# -ge 2 ] || die "--bundle needs a file from scripts/bundle.sh"; bundle=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done

[ "$(id -u)" -eq 0 ] || die "needs root (mmdebstrap, mount, chroot): run it with sudo"
if [ -n "$bundle" ]; then
  [ -f "$bundle" ] || die "no bundle at '$bundle': make one with scripts/bundle.sh"
  bundle=$(realpath "$bundle")
  what="$(basename "$bundle"): ${command:-quickstart training}"
  command=${command:-'set -e
    echo "--- ldd bin/dtrain"; ldd bin/dtrain
    for p in bin/*; do ! ldd "$p" | grep "not found" || { echo "$p: libraries not found"; exit 1; }; done
    bin/dtrain data builtin --out data/builtin
    bin/dtrain train --config configs/quickstart.toml --set train.max_steps=20 --run-dir runs/one
    bin/dtrain generate --checkpoint runs/one/model_final --prompt "the licensee may" --tokens 12
    bin/dtrun --standalone --nproc-per-node 2 bin/dtrain train --config configs/quickstart.toml \
        --set train.max_steps=10 --run-dir runs/two'}
else
  git -C "$repo" rev-parse --verify --quiet HEAD >/dev/null || die "$repo has no commit to clone"
  command=${command:-scripts/test.sh}
  what=$command
  [ -z "$(git -C "$repo" status --porcelain --untracked-files=no)" ] ||
    say "note: uncommitted changes in $repo are not checked (the root gets the committed HEAD)"
fi

need=()
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v git >/dev/null || need+=(git)
command -v xz >/dev/null || need+=(xz-utils)
if [ ${#need[@]} -gt 0 ]; then
  say "installing ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

made_root=0
if [ -z "$root" ]; then
  root=$(mktemp -d /tmp/dtrain-fresh.XXXXXX)
  made_root=1
else
  mkdir -p "$root"
  root=$(realpath "$root")
  [ "$root" != / ] || die "--root / : give a folder of its own"
  [ -f "$root/$marker" ] || [ -z "$(ls -A "$root")" ] ||
    die "--root $root is neither empty nor a root kept by this script: give a new folder"
fi
case "$root" in *[[:space:]]*) die "--root '$root' has a space: give a folder without one" ;; esac

mounts_under() {  # mount points at or below $root in this (the host's) mount namespace
  awk -v r="$root" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo
}

inner=""
started=$SECONDS
finish() {
  local rc=$? left
  trap - EXIT INT TERM
  if [ -n "$inner" ] && kill -0 "$inner" 2>/dev/null; then
    kill -KILL "$inner" 2>/dev/null || true  # unshare --kill-child then kills the namespace's init,
    wait "$inner" 2>/dev/null || true        # and the kernel every process and mount in it
  fi
  for _ in $(seq 50); do  # processes still running in the root (none expected), gone within 5 s
    left=$(for p in /proc/[0-9]*; do [ "$(readlink "$p/root" 2>/dev/null)" != "$root" ] || echo "${p#/proc/}"; done)
    [ -n "$left" ] || break
    sleep 0.1
  done
  if [ -n "$left" ]; then
    say "processes $(echo $left) still run in $root: left it in place"
  elif [ -n "$(mounts_under)" ]; then
    say "still mounted under $root: $(mounts_under | tr '\n' ' ')- left it in place"
  elif [ "$keep" = 1 ]; then
    say "kept the root: $root (again: --root $root; look: chroot $root /bin/bash)"
  elif [ "$made_root" = 1 ] || [ -f "$root/$marker" ]; then
    rm -rf --one-file-system "$root"
  fi
  local took=$((SECONDS - started))
  if [ "$rc" -eq 0 ]; then
    say "PASSED: $what in a fresh Debian 12 root ($((took / 60))m $((took % 60))s)"
  else
    say "FAILED (exit $rc): $what in a fresh Debian 12 root ($((took / 60))m $((took % 60))s)"
  fi
  exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "checking $(git -C "$repo" rev-parse --short HEAD) in $root"
export FRESH_ROOT=$root FRESH_BUNDLE=$bundle FRESH_COMMAND=$command FRESH_WHAT=$what
export FRESH_HOSTNAME="dtrain-fresh-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')"
# Background + wait, so that a signal reaches the trap at once; the namespace's processes ignore
# the terminal's Ctrl-C (a script's background job) and end when the trap kills unshare.
unshare --mount --uts --pid --kill-child --mount-proc "$BASH" "$0" --inside-namespace &
inner=$!
set +e
wait "$inner"
rc=$?
set -e
inner=""
exit "$rc"
