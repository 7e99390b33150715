#!/usr/bin/env bash
# Out of file descriptors: a rank under a low `ulimit -n`, and dtrun itself, fail at once with one
# line naming the limit and how to raise it (not a rank that never joins, not the network's fault).
source "$2/tests/e2e/lib.sh" "$1" "$2" "for the shared setup"
train=("$bin/dtrain" train --config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=32
  --set model.heads=2 --set model.layers=1 --set model.ff_dim=64 --set train.max_steps=2 --set train.epochs=0
  --set train.progress=false --set parallel.timeout_s=30)

# `ulimit -n N` for the command after it, with only stdin, stdout and stderr open (descriptors a
# test runner passes down would take the few slots there are).
limited='n=$1; shift; for f in /proc/self/fd/*; do f=${f##*/}; [ "$f" -gt 2 ] && eval "exec $f>&-"; done
ulimit -n "$n"; exec "$@"'

# Rank 1 of 2 gets `ulimit -n N`: 4 leaves no room for its store connection, 5 none for Gloo's
# transport, 6 too little for it.
for n in 4 5 6; do
  rc=0
  timeout 60 "$bin/dtrun" --standalone --nproc-per-node 2 \
    bash -c 'if [ "$RANK" = 1 ]; then exec bash -c "$0" _ "$@"; fi; exec "${@:2}"' "$limited" "$n" "${train[@]}" \
    --run-dir "$work/run$n" \
    >"$work/limit$n.out" 2>&1 || rc=$?
  [ "$rc" -eq 1 ] || { cat "$work/limit$n.out"; fail "ulimit -n $n: dtrun exited $rc, expected 1 (a failed worker)"; }
  line=$(grep '^\[1\]: dtrain: error: ' "$work/limit$n.out" || true)
  [[ $line == *"this process may open only $n files (ulimit -n)"*"raise the limit (ulimit -n 65536, or LimitNOFILE"* ]] ||
    { cat "$work/limit$n.out"; fail "ulimit -n $n: rank 1's error does not name the descriptor limit"; }
  [[ $line != *DTRAIN_SOCKET_IFNAME* ]] || fail "ulimit -n $n: rank 1 blames the network interface: $line"
  [ "$(grep -c "(ulimit -n)" "$work/limit$n.out")" -eq 1 ] || { cat "$work/limit$n.out"; fail "ulimit -n $n: said more than once"; }
  echo "ok  ulimit -n $n on rank 1: ${line:0:160}"
done

# dtrun itself: its store, its own connection to it and the workers' pipes need descriptors.
rc=0
out=$(timeout 60 bash -c "$limited" _ 7 "$bin/dtrun" --standalone --nproc-per-node 2 true 2>&1) || rc=$?
[ "$rc" -eq 2 ] || fail "dtrun under ulimit -n 7 exited $rc, expected 2: $out"
[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "dtrun under ulimit -n 7: expected one line, got: $out"
[[ $out == "dtrun: error: "*"may open only 7 files (ulimit -n)"* ]] || fail "unexpected message: $out"
echo "ok  ulimit -n 7 on dtrun: ${out:0:160}"
echo "PASS: descriptor limits are named at once, by the rank or by dtrun"
