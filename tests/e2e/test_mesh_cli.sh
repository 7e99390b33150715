#!/usr/bin/env bash
# The device mesh from the command line: rank 0 prints the mesh and each rank's place; sizes that do
# not make the world, or that disagree, are one line, as are bad FSDP settings; dp_shard left to the
# world shards over it; tp=-1 and pp=-1 take what the world leaves for tensor or pipeline
# parallelism; pipelines that cannot be built are refused with one line, and dtrun stops the job; an
# error every rank finds is said once.
source "$2/tests/e2e/lib.sh" "$1" "$2" "for the shared test start"
d=$bin/dtrain
common=(--config "$src/configs/quickstart.toml" --set data.dir="$work/data" --set model.dim=32
  --set model.heads=2 --set model.layers=1 --set model.ff_dim=64 --set model.seq_len=16
  --set train.batch_size=8 --set data.stride=64 --set train.threads=1 --set train.progress=false
  --set train.eval_max_batches=1 --set train.max_steps=2)

"$bin/dtrun" --standalone --nproc-per-node 2 "$d" train "${common[@]}" --set parallel.dp_replicate=-1 \
  --run-dir "$work/ddp" >"$work/ddp.out" 2>&1 || { cat "$work/ddp.out"; fail "a 2-rank dp_replicate=-1 run failed"; }
want="mesh: pp 1 × dp_replicate 2 × dp_shard 1 × tp 1 (2 ranks, tp fastest; collectives over Gloo); rank 0: pp 0, dp_replicate 0, dp_shard 0, tp 0; rank 1: pp 0, dp_replicate 1, dp_shard 0, tp 0"
grep -qF "$want" "$work/ddp.out" || fail "rank 0 should print '$want', saw: $(grep mesh "$work/ddp.out")"
[ "$(grep -c "mesh: " "$work/ddp.out")" -eq 1 ] || fail "only rank 0 should print the mesh"
echo "ok  $(grep -o 'mesh: .*' "$work/ddp.out")"

expect_one_error "mesh larger than the world" \
  "parallel.pp 1 × parallel.dp_replicate 2 × parallel.dp_shard 1 × parallel.tp 1 = 2 ranks, but the job has 1" \
  "$d" train "${common[@]}" --set parallel.dp_replicate=2 --run-dir "$work/e1"
expect_one_error "parallel.dp against dp_replicate" "parallel.dp = 2 and parallel.dp_replicate = 1 disagree" \
  "$d" train "${common[@]}" --set parallel.dp=2 --set parallel.dp_replicate=1 --run-dir "$work/e2"
expect_one_error "two sizes left open" "at most one of them may be -1" \
  "$d" train "${common[@]}" --set parallel.tp=-1 --run-dir "$work/e3"

# A mesh that does not fit 4 ranks: every rank finds it, rank 0 says it, once (dtrun repeats nothing).
rc=0
"$bin/dtrun" --standalone --nproc-per-node 4 "$d" train "${common[@]}" --set parallel.tp=3 --run-dir "$work/e5" \
  >"$work/e5.out" 2>&1 || rc=$?
[ $rc -ne 0 ] && [ "$(grep -c "4 is not a multiple of 3" "$work/e5.out")" -eq 1 ] ||
  fail "a mesh error at 4 ranks should be said once, saw rc $rc: $(cat "$work/e5.out")"
echo "ok  said once at 4 ranks: $(grep -o "dtrain: error: .*" "$work/e5.out" | cut -c1-100)"

expect_one_error "negative prefetch" "parallel.fsdp_prefetch = -1 (--set) is outside 0..64" \
  "$d" train "${common[@]}" --set parallel.fsdp_prefetch=-1 --run-dir "$work/e4"
expect_one_error "bf16 reduction in f32 training" "parallel.fsdp_reduce_dtype = bf16 needs train.precision = bf16" \
  "$d" train "${common[@]}" --set parallel.fsdp_reduce_dtype=bf16 --run-dir "$work/e5"

"$bin/dtrun" --standalone --nproc-per-node 2 "$d" train "${common[@]}" --set parallel.dp_replicate=1 \
  --set parallel.dp_shard=-1 --run-dir "$work/fsdp" >"$work/fsdp.out" 2>&1 || { cat "$work/fsdp.out"; fail "a dp_shard=-1 run failed"; }
grep -qF "mesh: pp 1 × dp_replicate 1 × dp_shard 2 × tp 1" "$work/fsdp.out" || fail "dp_shard=-1 did not shard over both ranks"
grep -q "fully sharded: FULL_SHARD over 2 ranks" "$work/fsdp.out" || fail "the FSDP run did not say so"

"$bin/dtrun" --standalone --nproc-per-node 2 "$d" train "${common[@]}" --set parallel.dp_replicate=1 \
  --set parallel.tp=-1 --run-dir "$work/tp" >"$work/tp.out" 2>&1 || { cat "$work/tp.out"; fail "a tp=-1 run failed"; }
grep -qF "mesh: pp 1 × dp_replicate 1 × dp_shard 1 × tp 2" "$work/tp.out" || fail "tp=-1 did not take both ranks"
grep -q "tensor parallel: 2 ranks; per rank" "$work/tp.out" || fail "the tensor-parallel run did not say so"

"$bin/dtrun" --standalone --nproc-per-node 2 "$d" train "${common[@]}" --set parallel.dp_replicate=1 \
  --set parallel.pp=-1 --run-dir "$work/pp" >"$work/pp.out" 2>&1 || { cat "$work/pp.out"; fail "a pp=-1 run failed"; }
grep -qF "mesh: pp 2 × dp_replicate 1 × dp_shard 1 × tp 1" "$work/pp.out" || fail "pp=-1 did not take both ranks"
grep -q "pipeline: 1f1b, 2 ranks × 1 stages, 2 micro-batches per pass" "$work/pp.out" || fail "the pipeline run did not say so"

# pipelines that cannot be built are refused with one line on every rank
refused() {  # $1 = what, $2 = the expected error, then --set arguments
  local what=$1 needle=$2; shift 2
  local rc=0
  "$bin/dtrun" --standalone --nproc-per-node 2 "$d" train "${common[@]}" --set parallel.pp=2 "$@" --run-dir "$work/r" \
    >"$work/refused.out" 2>&1 || rc=$?
  [ $rc -ne 0 ] || fail "$what should be refused, dtrun exited 0"
  grep -q "dtrain: error: $needle" "$work/refused.out" ||
    fail "$what: expected 'dtrain: error: $needle', saw: $(cat "$work/refused.out")"
  echo "ok  $what refused: $(grep -m1 -o "dtrain: error: .*" "$work/refused.out" | cut -c1-120)"
}
refused "more stages than units" "the pipeline has 4 stages but the model only 3 units" \
  --set parallel.pp_schedule=zb-v --set parallel.pp_virtual=2
refused "a tied head on another stage" "unit head reads the parameters of unit embed (a tied weight, e.g. model.tied = true), and the pipeline puts them on different ranks" \
  --set model.tied=true
refused "zb-v with one stage per rank" "parallel.pp_schedule = zb-v needs parallel.pp_virtual = 2"  \
  --set parallel.pp_schedule=zb-v
echo "PASS"
