#!/usr/bin/env bash
# Sets up, builds, and runs the main job: `kareus plan` on the default configuration
# (Llama 3.2 3B, 2 x 8 A100-40GB, the artifact's 15/13 stage split) on the emulator.
# It installs only the planner's build dependencies and builds no tests (scripts/test.sh does).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh -DKAREUS_BUILD_TESTS=OFF -DKAREUS_BUILD_BENCH=OFF -DKAREUS_BUILD_PYTHON=OFF
./build/tools/kareus plan --layers-per-stage 15,13 --out out/plan "$@"
