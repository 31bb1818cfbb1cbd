#!/usr/bin/env bash
# `pip install .` into a fresh venv, offline, then the installed commands from the venv's bin/:
# `kareus models` and `kareus plan --out D` must print and write what the build's own kareus
# ($KAREUS) does, `kareusd --help` must run, and the venv's python must import kareus._runtime
# from its site-packages. Needs the build requirements in the wheelhouse (scripts/setup.sh
# --all puts them there); without them it skips (exit 77).
# Environment: KAREUS (the build's kareus), SOURCE_DIR, WHEELHOUSE, and the build's BUILD_TYPE,
# CXX_COMPILER and WERROR (the same flags make ccache's hits and the same binaries).
set -euo pipefail
: "${KAREUS:?}" "${SOURCE_DIR:?}" "${WHEELHOUSE:?}" "${BUILD_TYPE:?}" "${CXX_COMPILER:?}" "${WERROR:?}"
if ! compgen -G "$WHEELHOUSE/scikit_build_core-*.whl" >/dev/null || ! compgen -G "$WHEELHOUSE/pybind11-*.whl" >/dev/null; then
  echo "SKIP: no scikit-build-core or pybind11 wheel in $WHEELHOUSE (bash scripts/setup.sh --all fetches them)"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/kareus-pip-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
check() { # check NAME COMMAND...: run COMMAND, count a failure naming NAME
  if "${@:2}"; then echo "ok: $1"; else echo "FAILED: $1"; failures=$((failures + 1)); fi
}

python3 -m venv "$work/venv"
venv_bin=$work/venv/bin
# The build folder sits one level below the sources, as scripts/build.sh's build/ does, and the
# flags match the build's, so ccache (when present) turns the compile into cache hits; it starts
# empty every time so the configure is fresh.
build_dir=$SOURCE_DIR/build-pip-install-test
rm -rf "$build_dir"
settings=(--config-settings=build-dir="$build_dir" --config-settings=cmake.build-type="$BUILD_TYPE"
  --config-settings=cmake.define.KAREUS_WERROR="$WERROR" --config-settings=cmake.define.CMAKE_CXX_COMPILER="$CXX_COMPILER")
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(dirname "$SOURCE_DIR")} CCACHE_NOHASHDIR=1
  settings+=(--config-settings=cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
start=$SECONDS
if ! "$venv_bin/python" -m pip install --quiet --no-index --find-links "$WHEELHOUSE" "${settings[@]}" \
  "$SOURCE_DIR" >"$work/pip.log" 2>&1; then
  tail -60 "$work/pip.log"
  echo "FAILED: pip install --no-index --find-links $WHEELHOUSE $SOURCE_DIR"
  rm -rf "$build_dir"
  exit 1
fi
rm -rf "$build_dir"
echo "pip install took $((SECONDS - start)) s"

check "kareus and kareusd are in the venv's bin/" test -x "$venv_bin/kareus" -a -x "$venv_bin/kareusd"
# The commands run from an unrelated folder with only the venv's bin/ added to PATH.
cd "$work"
export PATH=$venv_bin:$PATH
check "PATH finds the venv's kareus" test "$(command -v kareus)" = "$venv_bin/kareus"
"$KAREUS" models >"$work/models.expected"
kareus models >"$work/models.got"
check "kareus models prints what the build's kareus prints" cmp "$work/models.expected" "$work/models.got"
for model in "$SOURCE_DIR"/data/models/*.json; do
  name=$(basename "$model" .json)
  check "kareus models lists $name" grep -qw -- "$name" "$work/models.got"
done
"$KAREUS" plan --out "$work/plan.expected" >/dev/null 2>&1
kareus plan --out "$work/plan.got" >"$work/plan.stdout" 2>&1
check "kareus plan --out D writes summary.json and the plans" test -s "$work/plan.got/summary.json" -a -d "$work/plan.got/plans"
check "kareus plan's plans equal the build's kareus's" diff -r "$work/plan.expected/plans" "$work/plan.got/plans"
# The summary too, but for each method's solver wall time (solver_s).
same_summary() {
  python3 -c '
import json, sys
def drop_wall_times(node):
    if isinstance(node, dict):
        return {key: drop_wall_times(value) for key, value in node.items() if key != "solver_s"}
    return [drop_wall_times(value) for value in node] if isinstance(node, list) else node
expected, got = (drop_wall_times(json.load(open(path))) for path in sys.argv[1:])
sys.exit(0 if expected == got else 1)' "$1/summary.json" "$2/summary.json"
}
check "kareus plan's summary equals the build's kareus's (solver times aside)" same_summary "$work/plan.expected" "$work/plan.got"
plans=$(find "$work/plan.got/plans" -name '*.json' | wc -l)
check "kareus plan wrote plan files ($plans)" test "$plans" -gt 0
check "kareusd --help runs" kareusd --help >/dev/null
check "the venv's python imports kareus._runtime from its site-packages" python -c '
import sys, sysconfig, kareus, kareus._runtime
site = sysconfig.get_paths()["platlib"]
sys.exit(0 if kareus._runtime.__file__.startswith(site) and sys.prefix != sys.base_prefix else 1)'
echo "$failures failed"
((failures == 0))
