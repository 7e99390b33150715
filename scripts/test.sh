#!/usr/bin/env bash
# The test suite: install, build (with tests), run every test with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh -DDTRAIN_TESTS=ON
cd build
ctest --output-on-failure -j"$(nproc)" "$@"
