#!/usr/bin/env bash
# Installs what kareus needs to build and test from Debian's packages. Idempotent.
set -euo pipefail
packages=(
  cmake ninja-build g++ python3 python3-venv python3-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev libeigen3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  pybind11-dev clang libclang-rt-14-dev clang-format
  chromium ccache
  pkg-config libcpp-httplib-dev
)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The Python module's tests run under the python3 on PATH (ctest calls it). pytest from PyPI,
# or Debian's python3-pytest where that python is the system one (PEP 668 refuses pip there).
if ! python3 -c "import pytest" 2>/dev/null; then
  if ! python3 -m pip install --quiet pytest 2>/dev/null; then
    sudo_cmd=()
    [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends python3-pytest
  fi
fi
