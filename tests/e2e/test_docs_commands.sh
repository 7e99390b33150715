#!/usr/bin/env bash
# Every command block of the README and the docs runs as written (tests/python/doc_commands.py: on
# a tiny model, in a sandbox laid out like a checkout; what needs a cluster, a GPU, a build or minutes
# of measurement is listed as skipped with the reason).
source "$2/tests/e2e/lib.sh" "$1" "$2" "to parse the Markdown"
"$py" "$src/tests/python/doc_commands.py" "$src" "$bin" "$work"
echo PASS
