#!/usr/bin/env bash
# Sets up, builds, and runs the most complete kareus job on the emulator.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
./build/tools/kareus partitions "$@"
