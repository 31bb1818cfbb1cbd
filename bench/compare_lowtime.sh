#!/usr/bin/env bash
# Compares `kareus solve` with lowtime 0.3.0 on the generated profiles (bench/data/). Installs
# lowtime into build/lowtime-venv (gitignored) on first use.
# Usage: bench/compare_lowtime.sh [--medium] [--large]
#   default: 2 stages x 8 microbatches (the artifact's shape) at 1 ms, and a convex 2 x 8 profile at 5 ms, ~20 s
#   --medium: adds 4 stages x 16 microbatches (lowtime takes minutes)
#   --large:  adds 8 stages x 64 microbatches (lowtime takes the better part of an hour)
# Each kareus build runs KAREUS_RUNS times (default 9) and its median solver CPU is compared; lowtime
# runs five times when its solve takes under a second (the median), once otherwise.
# KAREUS_BEFORE=BINARY adds another kareus build's CPU time and frontier (a before/after column);
# LOWTIME_CACHE_DIR=DIR keeps lowtime's result per case in DIR and reads it back when there (run
# the 8 x 64 peer once, apart from the timed kareus runs).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${LOWTIME_VENV:-build/lowtime-venv}
if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c 'import lowtime' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q lowtime==0.3.0
fi
kareus=${KAREUS:-build/tools/kareus}
"$venv/bin/python" bench/compare_lowtime.py "$kareus" bench/data/a100_2stages.csv 2 8 0.001 85
# The fast end at a coarse unit: a convex profile (time 0.3 + 0.7 x f_max/f, see make_profile.py)
# at 5 ms, where the frontier once skipped the times next to the minimum.
"$venv/bin/python" bench/compare_lowtime.py "$kareus" bench/data/convex_2stages.csv 2 8 0.005 85
for flag in "$@"; do
  case $flag in
    --medium) "$venv/bin/python" bench/compare_lowtime.py "$kareus" bench/data/a100_4stages.csv 4 16 0.001 85 ;;
    --large) "$venv/bin/python" bench/compare_lowtime.py "$kareus" bench/data/a100_8stages.csv 8 64 0.001 85 ;;
    *) echo "compare_lowtime.sh: unknown flag $flag (expected --medium or --large)" >&2; exit 2 ;;
  esac
done
