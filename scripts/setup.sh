#!/usr/bin/env bash
# Installs what kareus needs, idempotently.
#   scripts/setup.sh         the planner's build dependencies only (what `kareus plan` needs:
#                            a compiler, CMake, Ninja and five header libraries from Debian)
#   scripts/setup.sh --all   everything the tests need too: GoogleTest, Google Benchmark, pybind11,
#                            clang's sanitizer runtime, Chromium (the report test), pytest, and a
#                            .venv/ with torch, zeus and megatron-core from PyPI (several GB), and
#                            `pip install .`'s build requirements in the wheelhouse (its offline test)
set -euo pipefail
all=0
case ${1:-} in
  "") ;;
  --all) all=1 ;;
  *) echo "setup.sh: unknown argument '$1' (expected nothing or --all)" >&2; exit 2 ;;
esac
packages=(
  cmake ninja-build g++ ccache pkg-config
  nlohmann-json3-dev libcli11-dev libfmt-dev libeigen3-dev libcpp-httplib-dev
)
if ((all)); then
  packages+=(
    python3 python3-venv python3-dev pybind11-dev
    libgtest-dev libgmock-dev libbenchmark-dev
    clang libclang-rt-14-dev clang-format chromium
  )
fi
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
((all)) || exit 0

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
# build, about 3 GB of NVIDIA wheels, 6 GB installed; it runs on CPU too), numpy and pytest, so
# .venv/bin/torchrun runs examples/train_llama.py and ctest runs python/tests/torch with it. The
# kareus module is importable there through a .pth file naming the build's python/ folder
# (build/python, or $KAREUS_BUILD_DIR/python). The wheels are kept in a wheelhouse per machine
# ($KAREUS_WHEELHOUSE, default ~/.cache/kareus/wheels), so a fresh clone installs from disk.
# The download is the one step here that a flaky network or a full disk can break: it is retried
# (resuming where pip can), and when it still fails, or the disk lacks room, setup says so and goes
# on without torch: the torch tests then skip instead of failing every other test's run.
# KAREUS_NO_TORCH=1 skips the block.
repo_root=$(cd "$(dirname "$0")/.." && pwd)
venv=$repo_root/.venv
torch_requirements=(torch numpy pytest)
torch_disk_needed_gib=10 # wheels (3 GB) + installed (6 GB) + slack

free_gib() { df --output=avail -BG "$1" | tail -1 | tr -dc 0-9; }
install_from_wheelhouse() {
  "$venv/bin/python" -m pip install --quiet --no-index --find-links "$1" "${torch_requirements[@]}"
}

download_torch_wheels() {
  local wheelhouse=$1 resume=() attempt
  # pip >= 25.1 resumes an interrupted download; older pips start it again.
  "$venv/bin/python" -m pip install --quiet --upgrade pip 2>/dev/null || true
  "$venv/bin/python" -m pip download --help | grep -q -- --resume-retries && resume=(--resume-retries 5)
  for attempt in 1 2 3; do
    "$venv/bin/python" -m pip download --quiet --no-cache-dir --timeout 60 --retries 5 "${resume[@]}" \
      --dest "$wheelhouse" "${torch_requirements[@]}" && return 0
    echo "setup.sh: downloading torch failed (attempt $attempt of 3)" >&2
    ((attempt < 3)) && sleep $((attempt * 15))
  done
  return 1
}

install_torch() {
  local wheelhouse=${KAREUS_WHEELHOUSE:-$HOME/.cache/kareus/wheels}
  [[ -x $venv/bin/python ]] || python3 -m venv "$venv" || return 1
  "$venv/bin/python" -c "import torch, numpy, pytest" 2>/dev/null && return 0
  mkdir -p "$wheelhouse" || return 1
  install_from_wheelhouse "$wheelhouse" 2>/dev/null && return 0
  local free_repo free_wheels
  free_repo=$(free_gib "$repo_root") free_wheels=$(free_gib "$wheelhouse")
  if ((free_repo < torch_disk_needed_gib || free_wheels < torch_disk_needed_gib)); then
    echo "setup.sh: torch needs ${torch_disk_needed_gib} GiB free; $repo_root has ${free_repo}," \
      "$wheelhouse ${free_wheels}" >&2
    return 1
  fi
  download_torch_wheels "$wheelhouse" && install_from_wheelhouse "$wheelhouse"
}

if [[ -z ${KAREUS_NO_TORCH:-} ]]; then
  if install_torch; then
    site_packages=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    echo "$repo_root/${KAREUS_BUILD_DIR:-build}/python" >"$site_packages/kareus-build.pth"
  else
    # A half-installed torch could fail to import with something other than ImportError, which
    # pytest.importorskip would not skip: leave no torch behind.
    "$venv/bin/python" -m pip uninstall --quiet --yes torch 2>/dev/null || true
    echo "setup.sh: WARNING: torch is not installed; the kareus.torch tests will be skipped" >&2
  fi
fi

# --- `pip install .`'s build requirements (pyproject.toml) into the wheelhouse ---------------------
# so tests/install/pip_install_test.sh installs kareus into a fresh venv offline (pip's build
# isolation takes them from there: pip install --no-index --find-links WHEELHOUSE .).
build_requirements=(scikit-build-core==1.1.2 pybind11==3.1.0 pathspec==1.1.1 packaging==26.4)
fetch_build_requirements() {
  local wheelhouse=${KAREUS_WHEELHOUSE:-$HOME/.cache/kareus/wheels} attempt
  { [[ -x $venv/bin/python ]] || python3 -m venv "$venv"; } || return 1
  mkdir -p "$wheelhouse" || return 1
  for attempt in 1 2 3; do
    "$venv/bin/python" -m pip download --quiet --no-index --find-links "$wheelhouse" --dest "$wheelhouse" \
      "${build_requirements[@]}" 2>/dev/null && return 0
    "$venv/bin/python" -m pip download --quiet --timeout 60 --retries 5 --dest "$wheelhouse" \
      "${build_requirements[@]}" && return 0
    echo "setup.sh: downloading ${build_requirements[*]} failed (attempt $attempt of 3)" >&2
    ((attempt < 3)) && sleep $((attempt * 15))
  done
  return 1
}
fetch_build_requirements || echo "setup.sh: WARNING: ${build_requirements[*]} are not in the wheelhouse; the" \
  "pip_install test will be skipped" >&2

# --- kareus.megatron: megatron-core into .venv/ beside torch (python/tests/megatron) ----------------
# 0.16.1 is the newest release that installs on Python 3.11. Its wheel goes into the wheelhouse
# (its dependencies torch, numpy and packaging are there already), so a fresh clone installs it
# from disk; the download is retried like torch's. Without it the megatron tests skip.
megatron_requirement=megatron-core==0.16.1
install_megatron() {
  local wheelhouse=${KAREUS_WHEELHOUSE:-$HOME/.cache/kareus/wheels} attempt
  "$venv/bin/python" -c "import importlib.metadata as m; assert m.version('megatron-core') == '0.16.1'" \
    2>/dev/null && return 0
  for attempt in 1 2 3; do
    "$venv/bin/python" -m pip install --quiet --no-index --find-links "$wheelhouse" "$megatron_requirement" \
      2>/dev/null && return 0
    "$venv/bin/python" -m pip download --quiet --no-deps --timeout 60 --retries 5 --dest "$wheelhouse" \
      "$megatron_requirement" && continue
    echo "setup.sh: downloading $megatron_requirement failed (attempt $attempt of 3)" >&2
    ((attempt < 3)) && sleep $((attempt * 15))
  done
  return 1
}
if [[ -z ${KAREUS_NO_TORCH:-} ]] && "$venv/bin/python" -c "import torch" 2>/dev/null; then
  install_megatron || echo "setup.sh: WARNING: $megatron_requirement is not installed; the kareus.megatron tests" \
    "will be skipped" >&2
fi

# --- interop: Zeus's pipeline frequency optimizer client (tests/interop/zeus_pfo_test.py) -------
# zeus[pfo]==0.16.0 and aiofiles (its common module imports it) into the repo's .venv/; a no-op
# when they are there already. Without them (no network) only the zeus_pfo test is skipped.
if ! "$venv/bin/python" -c \
  "import importlib.metadata as m; assert m.version('zeus') == '0.16.0'; m.version('aiofiles')" 2>/dev/null; then
  { [[ -x $venv/bin/python ]] || python3 -m venv "$venv"; } &&
    "$venv/bin/pip" install --quiet 'zeus[pfo]==0.16.0' aiofiles ||
    echo "setup.sh: could not install zeus[pfo]==0.16.0 into .venv/; the zeus_pfo test will be skipped" >&2
fi
