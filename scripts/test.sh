#!/usr/bin/env bash
# Sets up everything (scripts/setup.sh --all), builds and runs every test (the slow ones last).
# `--sanitize` builds into build-asan/ with ASan+UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --all
if [[ ${1:-} == --sanitize ]]; then
  export KAREUS_BUILD_DIR=build-asan
  bash scripts/build.sh -DKAREUS_SANITIZE=ON -DKAREUS_BUILD_BENCH=OFF -DKAREUS_CUDA=OFF -DKAREUS_WERROR=ON -DCMAKE_BUILD_TYPE=Debug
else
  # Tests, benchmarks and the Python module on, whatever scripts/run.sh left in build/'s cache.
  bash scripts/build.sh -DKAREUS_BUILD_TESTS=ON -DKAREUS_BUILD_BENCH=ON -DKAREUS_BUILD_PYTHON=AUTO \
    -DKAREUS_WERROR=$([[ -n ${CI:-} ]] && echo ON || echo OFF)
fi
ctest --test-dir "${KAREUS_BUILD_DIR:-build}" --output-on-failure -j2 -LE slow
# The slow tests (label `slow`, tests/slow_tests.cmake) second, so a quick failure shows first;
# KAREUS_SKIP_SLOW_TESTS=1 leaves them out (CI never sets it).
if [[ -z ${KAREUS_SKIP_SLOW_TESTS:-} ]]; then
  ctest --test-dir "${KAREUS_BUILD_DIR:-build}" --output-on-failure -j2 -L slow
fi
