#!/usr/bin/env bash
# Compares `kareus solve` with lowtime 0.3.0 on the generated profiles (bench/data/). Installs
# lowtime into build/lowtime-venv (gitignored) on first use. Usage: bench/compare_lowtime.sh [--large]
# (--large adds 8 stages x 64 microbatches, which takes lowtime a long time).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=build/lowtime-venv
if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c 'import lowtime' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q lowtime==0.3.0
fi
kareus=${KAREUS:-build/tools/kareus}
"$venv/bin/python" bench/compare_lowtime.py "$kareus" bench/data/a100_2stages.csv 2 8 0.001 85
if [[ ${1:-} == --large ]]; then
  "$venv/bin/python" bench/compare_lowtime.py "$kareus" bench/data/a100_8stages.csv 8 64 0.001 85
fi
