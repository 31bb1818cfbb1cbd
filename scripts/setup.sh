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

# kareus.torch: a virtual environment .venv/ at the repository root with torch from PyPI (the CUDA
# build, about 3 GB of NVIDIA wheels; it runs on CPU too), numpy and pytest, so .venv/bin/torchrun
# runs examples/train_llama.py and ctest runs python/tests/torch with it. The kareus module is
# importable there through a .pth file naming the build's python/ folder (build/python, or
# $KAREUS_BUILD_DIR/python). The wheels are kept in a wheelhouse per machine
# ($KAREUS_WHEELHOUSE, default ~/.cache/kareus/wheels), so a fresh clone installs from disk.
# KAREUS_NO_TORCH=1 skips the block (the torch tests then skip).
if [[ -z ${KAREUS_NO_TORCH:-} ]]; then
  repo_root=$(cd "$(dirname "$0")/.." && pwd)
  venv=$repo_root/.venv
  wheelhouse=${KAREUS_WHEELHOUSE:-$HOME/.cache/kareus/wheels}
  torch_requirements=(torch numpy pytest)
  [[ -x $venv/bin/python ]] || python3 -m venv "$venv"
  if ! "$venv/bin/python" -c "import torch, numpy, pytest" 2>/dev/null; then
    mkdir -p "$wheelhouse"
    if ! "$venv/bin/python" -m pip install --quiet --no-index --find-links "$wheelhouse" "${torch_requirements[@]}" \
      2>/dev/null; then
      "$venv/bin/python" -m pip download --quiet --dest "$wheelhouse" "${torch_requirements[@]}"
      "$venv/bin/python" -m pip install --quiet --no-index --find-links "$wheelhouse" "${torch_requirements[@]}"
    fi
  fi
  site_packages=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  echo "$repo_root/${KAREUS_BUILD_DIR:-build}/python" >"$site_packages/kareus-build.pth"
fi

# --- interop: Zeus's pipeline frequency optimizer client (tests/interop/zeus_pfo_test.py) -------
# zeus[pfo]==0.16.0 and aiofiles (its common module imports it) into the repo's .venv/; a no-op
# when they are there already. Without them (no network) only the zeus_pfo test is skipped.
repo_root=$(cd "$(dirname "$0")/.." && pwd)
if ! "$repo_root/.venv/bin/python" -c \
  "import importlib.metadata as m; assert m.version('zeus') == '0.16.0'; m.version('aiofiles')" 2>/dev/null; then
  [[ -x $repo_root/.venv/bin/python ]] || python3 -m venv "$repo_root/.venv"
  "$repo_root/.venv/bin/pip" install --quiet 'zeus[pfo]==0.16.0' aiofiles ||
    echo "setup.sh: could not install zeus[pfo]==0.16.0 into .venv/; the zeus_pfo test will be skipped" >&2
fi
