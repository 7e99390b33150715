#!/usr/bin/env bash
# A host name that does not resolve (each rank renames its host in a UTS namespace): a two-rank
# file-store job (DTRAIN_STORE_DIR, no MASTER_ADDR) still connects its ranks and ends with the
# weights of one rank on the whole batch. Gloo's lookup of such a name crashed both ranks before.
# Where a network namespace can be made too (only loopback up): local ranks use loopback, and a
# rank told that other nodes exist stops with one line naming DTRAIN_SOCKET_IFNAME.
source "$2/tests/e2e/lib.sh" "$1" "$2" "to compare weights"
name="dtrain-unresolvable-$$-$RANDOM"
ns=()
for try in "unshare --uts" "unshare --user --map-root-user --uts"; do
  if $try true 2>/dev/null; then read -ra ns <<<"$try"; break; fi
done
[ ${#ns[@]} -gt 0 ] || { echo "SKIP: cannot make a UTS namespace (unshare --uts needs root or user namespaces)"; exit 77; }
if "${ns[@]}" sh -c 'hostname "$1" && getent hosts "$1"' _ "$name" >/dev/null 2>&1; then
  echo "SKIP: the host name $name resolves here (a wildcard resolver?)"; exit 77
fi

common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=64
  --set model.heads=4 --set model.layers=1 --set model.ff_dim=128 --set model.seq_len=32
  --set data.stride=32 --set train.max_steps=10 --set train.progress=false --set train.eval_max_batches=2
  --set optim.name=sgd --set optim.momentum=0.9 --set train.lr=0.05 --set optim.warmup_steps=0
  --set parallel.timeout_s=60)
"$bin/dtrain" train "${common[@]}" --set train.batch_size=16 --set train.threads=2 --run-dir "$work/single" \
  >"$work/single.out" 2>&1 || { cat "$work/single.out"; fail "single run failed"; }

for r in 0 1; do
  "${ns[@]}" sh -c 'hostname "$0" && exec "$@"' "$name" env RANK=$r WORLD_SIZE=2 DTRAIN_STORE_DIR="$work/store" \
    DTRAIN_JOB_TOKEN=unresolvable OMP_NUM_THREADS=1 "$bin/dtrain" train "${common[@]}" --set train.batch_size=8 \
    --run-dir "$work/files" >"$work/files$r.out" 2>&1 &
  eval "pid$r=$!"
done
set +e
wait "$pid0"; rc0=$?
wait "$pid1"; rc1=$?
set -e
[ "$rc0" -eq 0 ] || { cat "$work/files0.out"; fail "rank 0 on host '$name' exited $rc0"; }
[ "$rc1" -eq 0 ] || { cat "$work/files1.out"; fail "rank 1 on host '$name' exited $rc1"; }
grep -q "$name: ranks 0-1" "$work/files0.out" || { cat "$work/files0.out"; fail "rank 0 did not run under host name $name"; }
"$py" "$src/tests/python/compare_weights.py" "$work/single/model_final" "$work/files/model_final" 1e-5 \
  "unresolvable host name vs 1 rank" || fail "the 2-rank run on an unresolvable host name differs"

if ! "${ns[@]}" --net true 2>/dev/null || ! command -v ip >/dev/null; then
  echo "PASS: a file-store job on a host name that does not resolve (no network namespace here: loopback-only case skipped)"
  exit 0
fi
# Only loopback up: both ranks in one network namespace.
ranks_in_netns() {  # $1 = output prefix, then the command; starts RANK=0 and RANK=1, records their statuses
  "${ns[@]}" --net sh -c 'ip link set lo up && hostname "$1" || exit 90
    out=$2; shift 2
    RANK=0 "$@" >"${out}0.out" 2>&1 & p0=$!
    RANK=1 "$@" >"${out}1.out" 2>&1 & p1=$!
    wait $p0; r0=$?; wait $p1; r1=$?
    echo "$r0 $r1" >"${out}.rc"' _ "$name" "$@"
}
ranks_in_netns "$work/lo" env WORLD_SIZE=2 DTRAIN_STORE_DIR="$work/store-lo" DTRAIN_JOB_TOKEN=lo OMP_NUM_THREADS=1 \
  "$bin/dtrain" train "${common[@]}" --set train.batch_size=8 --run-dir "$work/lo" || fail "cannot set up the network namespace"
[ "$(cat "$work/lo.rc")" = "0 0" ] || { cat "$work/lo0.out" "$work/lo1.out"; fail "loopback-only ranks exited $(cat "$work/lo.rc")"; }
"$py" "$src/tests/python/compare_weights.py" "$work/single/model_final" "$work/lo/model_final" 1e-5 \
  "unresolvable host name, loopback only vs 1 rank" || fail "the loopback-only 2-rank run differs"

# A rank that must reach other nodes but has only loopback: one line naming the variable, status 2.
"${ns[@]}" --net sh -c 'ip link set lo up && hostname "$0" && exec "$@"' "$name" env RANK=0 WORLD_SIZE=2 \
  LOCAL_WORLD_SIZE=1 DTRAIN_STORE_DIR="$work/store-nodes" DTRAIN_JOB_TOKEN=nodes "$bin/dtrain" train "${common[@]}" \
  --set parallel.timeout_s=5 --run-dir "$work/nodes" >"$work/nodes.out" 2>&1 && rc=0 || rc=$?
[ "$rc" -eq 2 ] && [ "$(wc -l <"$work/nodes.out")" -eq 1 ] && grep -q "^dtrain: error: .*DTRAIN_SOCKET_IFNAME" "$work/nodes.out" ||
  { cat "$work/nodes.out"; fail "a rank with no address for other nodes exited $rc without one line naming DTRAIN_SOCKET_IFNAME"; }
echo "PASS: a file-store job on a host name that does not resolve (an interface, loopback only, no address)"
