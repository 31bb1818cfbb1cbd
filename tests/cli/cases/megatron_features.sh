# --sequence-parallel and --vpp (Megatron's sequence parallelism and interleaved 1F1B): the rules
# Megatron enforces, each refused naming its flag, and the commands that cannot express a chunk.
# shellcheck shell=bash
features_tmp=$(mktemp -d)
expect 2 '--sequence-parallel needs --tp >= 2, found --tp 1' -- partitions --tp 1 --sequence-parallel
expect 2 '--vpp 2 needs --pp >= 2' -- partitions --pp 1 --vpp 2
expect 2 '--vpp 2 needs --microbatches 6 divisible by --pp 4' -- plan --pp 4 --vpp 2 --microbatches 6 --out "$features_tmp/p"
expect 2 "--vpp 3 must divide every stage's layers; stage 0 has 14" -- plan --vpp 3 --out "$features_tmp/p"
expect 2 '--vpp 0 must be >= 1' -- simulate --clock 1410 --vpp 0
expect 0 'interleaved 1F1B' -- plan --help
# A plan made for --vpp 2 (its block edited; the planner does not write one yet): export and serve
# refuse it by --vpp, since the artifact's schedule files and Zeus's PFO protocol have no chunk.
"$KAREUS" plan --methods megatron --max-plans 2 --out "$features_tmp/plan" >/dev/null 2>&1
mkdir -p "$features_tmp/vpp2"
python3 - "$features_tmp/plan/plans/megatron/plan_00.json" "$features_tmp/vpp2/plan_00.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
plan["workload"]["vpp"] = 2
json.dump(plan, open(sys.argv[2], "w"))
PY
expect 2 "made for --vpp 2; the artifact's schedule files have no model chunk" -- \
  export --plan "$features_tmp/vpp2/plan_00.json" --format artifact --out "$features_tmp/artifact"
expect 2 "made for --vpp 2; Zeus's PFO protocol has no model chunk" -- serve --frontier "$features_tmp/vpp2" --port 0
rm -rf "$features_tmp"
