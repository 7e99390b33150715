# Shared start of the end-to-end scripts (sourced, not a test): arguments, a work dir removed on
# exit, fail(), a python3 for reading outputs, and the built-in corpus prepared in $work/data.
# Usage: source "$2/tests/e2e/lib.sh" "$1" "$2" "why python3 is needed"
set -euo pipefail
bin=$1 src=$2
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3 || true)
if [ -z "$py" ]; then echo "SKIP: no python3 ($3)"; exit 77; fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
"$bin/dtrain" data builtin --out "$work/data" >/dev/null
