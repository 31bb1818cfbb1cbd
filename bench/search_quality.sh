#!/usr/bin/env bash
# Search quality on the emulator (default noise): every searchable partition of the ten artifact
# configurations (docs/kareus.md section 7, PP 2, 8 microbatches) on a100-40gb, our search and the
# artifact's strategy at the same budget (default 10% of each space), artifact and all-slot spaces.
# Usage: bench/search_quality.sh [OUT.tsv]   (env: KAREUS=path/to/kareus, JOBS=parallel runs,
# SEEDS="0 1 2", SLOTS="artifact all", STRATEGIES="kareus artifact", FRACTION=0.1 of each space as the budget)
# Prints a markdown summary; the per-partition rows go to OUT.tsv (default search_quality.tsv).
set -euo pipefail
KAREUS=${KAREUS:-build/tools/kareus}
JOBS=${JOBS:-2}
SEEDS=${SEEDS:-0}
FRACTION=${FRACTION:-0.1}
SLOTS=${SLOTS:-artifact all}
STRATEGIES=${STRATEGIES:-kareus artifact}
out=${1:-search_quality.tsv}
configs=(
  "llama3.2-3b 1 8 8 4096" "llama3.2-3b 2 4 8 4096" "llama3.2-3b 2 4 8 8192" "llama3.2-3b 2 4 16 4096"
  "qwen3-1.7b 1 8 8 4096" "qwen3-1.7b 2 4 8 4096" "qwen3-1.7b 2 4 8 8192" "qwen3-1.7b 2 4 16 4096"
  "qwen3-1.7b 1 8 8 8192" "qwen3-1.7b 1 8 16 4096"
)
jobs_file=$(mktemp)
for config in "${configs[@]}"; do
  read -r model cp tp mbs seq <<<"$config"
  flags="--model $model --cp $cp --tp $tp --mbs $mbs --seq $seq --pp 2 --microbatches 8"
  for slots in $SLOTS; do
    # shellcheck disable=SC2086
    "$KAREUS" partitions $flags --slots "$slots" --clocks artifact --json |
      jq -r '.partitions[] | select(.collective != null) | "\(.key) \(.space_size)"' | sort -u |
      while read -r key size; do
        budget=$(awk "BEGIN { b = int($FRACTION * $size + 0.5); print (b < 1 ? 1 : b) }")
        for strategy in $STRATEGIES; do
          for seed in $SEEDS; do
            echo "$flags --partition $key --slots $slots --clocks artifact --budget $budget --strategy $strategy --seed $seed"
          done
        done
      done
  done
done >"$jobs_file"
echo "$(wc -l <"$jobs_file") searches, $JOBS at a time" >&2
# shellcheck disable=SC2016
xargs -P "$JOBS" -L 1 sh -c '"$0" search "$@" --json | jq -r --arg args "$*" \
  "[\$args, .partition, (.workload.model // .workload.model_name // \"?\"), .space_size, .evaluations, .strategy, \
    .hypervolume_ratio.energy, .hypervolume_ratio.effective_energy, \
    .front_hypervolume_ratio.energy, .front_hypervolume_ratio.effective_energy, .stop_reason] | @tsv"' \
  "$KAREUS" <"$jobs_file" >"$out"
rm -f "$jobs_file"
python3 - "$out" <<'PY'
import statistics, sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
groups = {}
for args, key, model, space, evaluations, strategy, r_e, r_eff, f_e, f_eff, stop in rows:
    slots = args.split("--slots ")[1].split()[0]
    groups.setdefault((slots, strategy), []).append((float(r_e), float(r_eff), float(f_e), float(f_eff), int(evaluations), int(space)))
print("| slots | strategy | searches | evaluated / space | ratio E median / min | ratio E_eff median / min | front ratio E median / min | front ratio E_eff median / min |")
print("|---|---|---|---|---|---|---|---|")
for (slots, strategy), values in sorted(groups.items()):
    def stat(column):
        data = [v[column] for v in values]
        return f"{statistics.median(data):.4f} / {min(data):.4f}"
    spent = sum(v[4] for v in values) / sum(v[5] for v in values)
    print(f"| {slots} | {strategy} | {len(values)} | {spent:.3f} | {stat(0)} | {stat(1)} | {stat(2)} | {stat(3)} |")
PY
