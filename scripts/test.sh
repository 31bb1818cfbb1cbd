#!/usr/bin/env bash
# Sets up, builds and runs every test. `--sanitize` builds into build-asan/ with ASan+UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [[ ${1:-} == --sanitize ]]; then
  export KAREUS_BUILD_DIR=build-asan
  bash scripts/build.sh -DKAREUS_SANITIZE=ON -DKAREUS_BUILD_BENCH=OFF -DKAREUS_CUDA=OFF -DKAREUS_WERROR=ON -DCMAKE_BUILD_TYPE=Debug
else
  bash scripts/build.sh -DKAREUS_WERROR=$([[ -n ${CI:-} ]] && echo ON || echo OFF)
fi
ctest --test-dir "${KAREUS_BUILD_DIR:-build}" --output-on-failure -j2 -LE slow
