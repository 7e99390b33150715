# Shared start of the bench scripts (sourced, not run): option parsing, a work folder removed on
# exit, the built-in corpus, and the settings that keep a measured run quiet.
# Usage, once `here`, `bin` and each option's default are set:
#   source "$here/lib.sh"
#   bench_options "--steps steps --bucket-mb buckets+ --set sets+" "$@"
#   bench_work; bench_data

# bench_options SPEC ARGS...: --bin DIR sets bin; SPEC's pairs "--opt var" set var to the option's
# value ("var+": add it to the array var; `--set sets+` adds `--set K=V` for --set K=V). Anything
# else ends the script: "unknown option X (see the header of SCRIPT)", exit 2.
bench_options() {
  local -A _bench_vars=()
  local _bench_spec=($1) _bench_i _bench_var
  shift
  for ((_bench_i = 0; _bench_i < ${#_bench_spec[@]}; _bench_i += 2)); do
    _bench_vars[${_bench_spec[_bench_i]}]=${_bench_spec[_bench_i + 1]}
  done
  while [ $# -gt 0 ]; do
    case $1 in
      --bin) bin=$2 ;;
      *)
        _bench_var=${_bench_vars[$1]:-}
        [ -n "$_bench_var" ] || { echo "unknown option $1 (see the header of $0)" >&2; exit 2; }
        if [[ $_bench_var == *+ ]]; then
          local -n _bench_list=${_bench_var%+}
          if [ "$1" = --set ]; then _bench_list+=(--set "$2"); else _bench_list+=("$2"); fi
          unset -n _bench_list
        else
          printf -v "$_bench_var" '%s' "$2"
        fi
        ;;
    esac
    shift 2
  done
}

# bench_work [MKTEMP-ARGS...]: $work, a fresh folder (mktemp -d with those arguments), removed on exit.
bench_work() {
  work=$(mktemp -d "$@")
  trap 'rm -rf "$work"' EXIT
}

# bench_data [DIR]: the built-in corpus prepared in DIR ($work/data when not given).
bench_data() { "$bin/dtrain" data builtin --out "${1:-$work/data}" >/dev/null; }

# What keeps a measured run quiet: no epochs, one evaluation batch, no progress line, rare log lines.
bench_quiet=(--set train.epochs=0 --set train.eval_max_batches=1 --set train.progress=false --set train.log_every=1000)
