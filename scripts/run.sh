#!/usr/bin/env bash
# Sets up, builds, and runs the main job: `kareus plan` on the default configuration
# (Llama 3.2 3B, 2 x 8 A100-40GB, the artifact's 15/13 stage split) on the emulator.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
./build/tools/kareus plan --layers-per-stage 15,13 --out out/plan "$@"
