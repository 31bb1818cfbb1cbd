#!/usr/bin/env bash
# `kareus plan` at the scale users train at (bench/RESULTS.md, "Planning at scale"): Llama 3.3
# 70B on TP 8 x PP 8 with 64 microbatches and GPT-3 175B on PP 16 with 128 microbatches, every
# method, at a 1 ms solver unit (targets: under 10 s and under 30 s of wall, under 1 GB).
# Prints per case the wall time, user CPU and peak RSS of the whole process, and per method the
# solver's wall time, iterations and fastest plan (from summary.json).
# Usage: bench/plan_scale.sh [--auto-unit]
#   --auto-unit: also both cases at the automatic unit
# KAREUS=BINARY (default build/tools/kareus); KAREUS_BEFORE=BINARY runs another build on each case
# right after it (a before/after pair). OUT=DIR keeps the outputs (default: a temporary folder).
set -euo pipefail
cd "$(dirname "$0")/.."
kareus=${KAREUS:-build/tools/kareus}
out=${OUT:-$(mktemp -d)}
cases=("llama3.3-70b --tp 8 --pp 8 --microbatches 64 --unit-time 0.001"
       "gpt3-175b --pp 16 --microbatches 128 --unit-time 0.001")
for flag in "$@"; do
  case $flag in
    --auto-unit) cases+=("llama3.3-70b --tp 8 --pp 8 --microbatches 64" "gpt3-175b --pp 16 --microbatches 128") ;;
    *) echo "plan_scale.sh: unknown flag $flag (expected --auto-unit)" >&2; exit 2 ;;
  esac
done

run() {  # LABEL BINARY MODEL FLAGS...
  local label=$1 binary=$2 model=$3
  shift 3
  local dir="$out/$label-$model-$(echo "$*" | tr -c 'a-z0-9' '_')"
  /usr/bin/time -f "%e %U %M" -o "$dir.time" "$binary" plan --model "$model" "$@" --out "$dir" >"$dir.log" 2>&1
  read -r wall_s user_s rss_kb <"$dir.time"
  printf '%-7s %s %s: %6.1f s wall, %6.1f s user CPU, %5d MiB peak\n' "$label" "$model" "$*" "$wall_s" "$user_s" \
    $((rss_kb / 1024))
  python3 - "$dir/summary.json" <<'EOF'
import json, sys
for name, method in json.load(open(sys.argv[1]))["methods"].items():
    if not method["frontier"]:
        continue
    fastest = method["frontier"][0]
    print(f"          {name:18s} solver {method['solver_s']:6.1f} s, {method['solver_iterations']:6d} iterations, "
          f"fastest {fastest['time_s']:.3f} s / {fastest['energy_j']:.0f} J")
EOF
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for case in "${cases[@]}"; do
  read -r model flags <<<"$case"
  # shellcheck disable=SC2086  # the flags are words
  run after "$kareus" "$model" $flags
  # shellcheck disable=SC2086
  if [[ -n ${KAREUS_BEFORE:-} ]]; then run before "$KAREUS_BEFORE" "$model" $flags; fi
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg); outputs in $out"
