#!/usr/bin/env bash
# Configures and builds kareus into build/ (or $KAREUS_BUILD_DIR). Extra args go to cmake.
# ccache (when installed) makes rebuilds in other clones and worktrees of the repo nearly free:
# CCACHE_BASEDIR turns absolute paths under the repo's parent into relative ones in its keys.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${KAREUS_BUILD_DIR:-build}
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(dirname "$PWD")} CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" "$@" >/dev/null
cmake --build "$build_dir"
