#!/usr/bin/env bash
# The ten artifact configurations (docs/kareus.md section 7: PP 2, 8 microbatches, 15/13 split,
# full recompute, the artifact's 18 clocks): `kareus plan` on each, then one table of every
# method's fastest plan, kareus's and N+P's iso metrics vs Perseus, and whether kareus's
# achieved frontier dominates both baselines'. Usage: bench/artifact_sweep.sh [KAREUS] [OUT]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kareus=${1:-$here/../build/tools/kareus}
out=${2:-$(mktemp -d)}
mkdir -p "$out"
configs=(
  "llama3.2-3b 1 8 8 4096" "llama3.2-3b 2 4 8 4096" "llama3.2-3b 2 4 8 8192" "llama3.2-3b 2 4 16 4096"
  "qwen3-1.7b 1 8 8 4096" "qwen3-1.7b 2 4 8 4096" "qwen3-1.7b 2 4 8 8192" "qwen3-1.7b 2 4 16 4096"
  "qwen3-1.7b 1 8 8 8192" "qwen3-1.7b 1 8 16 4096"
)
started=$(date +%s)
for config in "${configs[@]}"; do
  read -r model cp tp mbs seq <<<"$config"
  name="$model-cp$cp-tp$tp-mbs$mbs-seq$seq"
  "$kareus" plan --model "$model" --cp "$cp" --tp "$tp" --mbs "$mbs" --seq "$seq" --layers-per-stage 15,13 \
    --seed 1 --out "$out/$name" >"$out/$name.log" 2>&1
done
elapsed=$(($(date +%s) - started))
python3 "$here/artifact_sweep_table.py" "$out" "$elapsed"
