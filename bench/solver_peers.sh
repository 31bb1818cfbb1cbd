#!/usr/bin/env bash
# kareus's solver against lowtime 0.3.0 and the exact optimum on generated profiles
# (bench/solver_peers.py). Installs lowtime 0.3.0 (and with it scipy) into build/lowtime-venv
# (gitignored) on first use, as compare_lowtime.sh does.
# Usage: bench/solver_peers.sh [COUNT] [LABEL]   (default 12 profiles of the label "bench")
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${LOWTIME_VENV:-build/lowtime-venv}
if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c 'import lowtime, scipy.optimize' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q lowtime==0.3.0 scipy
fi
"$venv/bin/python" bench/solver_peers.py "${KAREUS:-build/tools/kareus}" "$@"
