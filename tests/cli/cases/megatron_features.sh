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
# A plan made for --vpp 2: export and serve refuse it by --vpp, since the artifact's schedule
# files and Zeus's PFO protocol have no chunk.
mkdir -p "$features_tmp/vpp2"
"$KAREUS" plan --methods megatron --pp 2 --vpp 2 --microbatches 4 --max-plans 2 --out "$features_tmp/plan" >/dev/null 2>&1
cp "$features_tmp/plan/plans/megatron/plan_00.json" "$features_tmp/vpp2/plan_00.json"
expect 2 "made for --vpp 2; the artifact's schedule files have no model chunk" -- \
  export --plan "$features_tmp/vpp2/plan_00.json" --format artifact --out "$features_tmp/artifact"
expect 2 "made for --vpp 2; Zeus's PFO protocol has no model chunk" -- serve --frontier "$features_tmp/vpp2" --port 0
# The plan carries its chunks; simulate reproduces the summary's time; a run for another --vpp
# is refused by the workload check.
check "a --vpp 2 plan carries its chunks and simulates to the summary's time" python3 - "$KAREUS" "$features_tmp/plan" <<'PY'
import json, math, pathlib, subprocess, sys
kareus, out = sys.argv[1], pathlib.Path(sys.argv[2])
summary = json.loads((out / "summary.json").read_text())
point = summary["methods"]["megatron"]["frontier"][0]
plan = json.loads((out / point["plan"]).read_text())
assert plan["schema"] == "kareus.plan/2" and plan["workload"]["vpp"] == 2, plan["workload"]
# Stage 1 warms up with (2 - 1) x 2 = 2 forwards of chunk 0, then microbatch 0's chunk 1.
first = [(i["type"], i["microbatch"], i["chunk"]) for i in plan["stages"][1]["instructions"][:4]]
assert first == [("forward", 0, 0), ("forward", 1, 0), ("forward", 0, 1), ("backward", 0, 1)], first
run = subprocess.run([kareus, "simulate", "--plan", str(out / point["plan"]), "--json"], capture_output=True, text=True,
                     check=True)
simulated = json.loads(run.stdout)
assert math.isclose(simulated["time_s"], point["time_s"], rel_tol=1e-9), (simulated, point)
assert all(stage["instructions"] == 16 for stage in simulated["stages"]), simulated
PY
expect 2 'made for vpp 2, this run has vpp 1' -- simulate --plan "$features_tmp/vpp2/plan_00.json" --vpp 1
rm -rf "$features_tmp"
