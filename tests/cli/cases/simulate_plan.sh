# kareus simulate and kareus plan: results and bad input.
# shellcheck shell=bash
plan_tmp=$(mktemp -d "${TMPDIR:-/tmp}/kareus-cli-plan.XXXXXX")  # this run's own
expect 2 'give either --clock' -- simulate
expect 2 '--clock 1405: a100-40gb supports 210..1410 MHz in 15 MHz steps' -- simulate --clock 1405
expect 2 '--overlap both: expected "none"' -- simulate --clock 1410 --overlap both
expect 2 'cannot read /nonexistent/plan.json' -- simulate --plan /nonexistent/plan.json
expect 2 '--gpu b200: unknown GPU' -- simulate --clock 1410 --gpu b200
expect 2 'unknown method "zeus"' -- plan --methods perseus,zeus --out "$plan_tmp"
expect 2 '--out /dev/null/x: cannot create directory' -- plan --methods megatron --out /dev/null/x
expect 2 '--clocks 907: a100-40gb supports' -- plan --clocks 900:1410:7 --out "$plan_tmp"
expect 2 '--within: only kareus plans within a time, and --methods leaves kareus out' -- plan --methods megatron,perseus --within 5 --out "$plan_tmp"
expect 2 '--within must be finite and > 0 s, found 0' -- plan --within 0 --out "$plan_tmp"
expect 2 '--within must be finite and > 0 s, found nan' -- plan --within nan --out "$plan_tmp"

# The numbers of one iteration: a lower locked clock is slower; each stage is busy or idle for
# the whole iteration; the job's energy is its average power over every GPU and the iteration.
check "simulate --clock: conservation and a slower lower clock" python3 - \
  "$("$KAREUS" simulate --clock 1410 --layers-per-stage 15,13 --json)" \
  "$("$KAREUS" simulate --clock 1200 --layers-per-stage 15,13 --json)" \
  "$("$KAREUS" simulate --clock 1200 --layers-per-stage 15,13 --overlap nanobatch --json)" <<'PY'
import json, math, sys
fast, slow, overlapped = (json.loads(text) for text in sys.argv[1:4])
gpus = 8 * 2  # the default TP 8 x PP 2
for run in (fast, slow, overlapped):
    assert len(run["stages"]) == 2 and all(stage["instructions"] == 16 for stage in run["stages"]), run
    for stage in run["stages"]:
        assert math.isclose(stage["busy_s"] + stage["idle_s"], run["time_s"], rel_tol=1e-9), stage
    assert math.isclose(run["avg_power_w"] * gpus * run["time_s"], run["energy_j"], rel_tol=1e-9), run
# Stage 0 holds 15 of the 28 layers: it is the busier one.
assert fast["stages"][0]["busy_s"] > fast["stages"][1]["busy_s"]
assert slow["time_s"] > 1.05 * fast["time_s"], (slow["time_s"], fast["time_s"])
# Nanobatching overlaps the TP collectives: the same clock runs faster.
assert overlapped["time_s"] < slow["time_s"], (overlapped["time_s"], slow["time_s"])
PY

# The README's run, then `simulate --plan` with no other flag: the plan brings its workload
# (here the 15,13 split) and GPU, and simulates to the time and energy the summary reports.
plan_stdout=$("$KAREUS" plan --methods megatron,perseus,kareus --layers-per-stage 15,13 --tp-ctas 6:30:12 --max-plans 3 \
  --within 5 --within 4 --out "$plan_tmp" 2>&1)
# --within T names kareus's least-energy plan among those the summary lists within T, which
# simulates within T; below kareus's fastest plan it says there is none.
check "plan --within names the least-energy plan within the time" python3 - "$KAREUS" "$plan_tmp" "$plan_stdout" <<'PY'
import json, pathlib, re, subprocess, sys
kareus, out, stdout = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3]
assert re.search(r"^kareus +[0-9.]+", stdout, re.M), stdout
frontier = json.loads((out / "summary.json").read_text())["methods"]["kareus"]["frontier"]
within = min((point for point in frontier if point["time_s"] <= 5), key=lambda point: point["energy_j"])
line = re.search(r"^kareus within 5\.000 s: (\S+) \(([0-9.]+) s, ([0-9]+) J\)$", stdout, re.M)
assert line and line.group(1) == f"{out}/{within['plan']}", (stdout, within)
run = subprocess.run([kareus, "simulate", "--plan", line.group(1), "--json"], capture_output=True, text=True, check=True)
assert json.loads(run.stdout)["time_s"] <= 5, run.stdout
fastest = f"{frontier[0]['time_s']:.3f}"
assert f"kareus within 4.000 s: no plan runs that fast (its fastest: {fastest} s)" in stdout, stdout
asked = json.loads((out / "summary.json").read_text())["within"]
assert asked == [{"time_s": 5.0, "plan": within["plan"]}, {"time_s": 4.0, "plan": None}], asked
PY
check "simulate --plan alone reproduces the summary" python3 - "$KAREUS" "$plan_tmp" <<'PY'
import json, math, pathlib, subprocess, sys
kareus, out = sys.argv[1], pathlib.Path(sys.argv[2])
summary = json.loads((out / "summary.json").read_text())
assert summary["workload"]["layers_per_stage"] == [15, 13], summary["workload"]
checked = 0
for method, result in summary["methods"].items():
    for point in result["frontier"]:
        block = json.loads((out / point["plan"]).read_text())["workload"]
        assert block["gpu"] == "a100-40gb" and block["layers_per_stage"] == [15, 13], (method, block)
        run = subprocess.run([kareus, "simulate", "--plan", str(out / point["plan"]), "--json"], capture_output=True,
                             text=True, check=True)
        simulated = json.loads(run.stdout)
        assert math.isclose(simulated["time_s"], point["time_s"], rel_tol=1e-9), (method, simulated, point)
        assert math.isclose(simulated["energy_j"], point["energy_j"], rel_tol=1e-9), (method, simulated, point)
        checked += 1
assert checked >= 6, checked
PY
# Workload flags given with a plan must agree with it, with the one message of the plan contract.
expect 2 'plan_00\.json: made for layers_per_stage \[15, 13\], this run has layers_per_stage \[14, 14\]' -- simulate --plan "$plan_tmp/plans/kareus/plan_00.json" --layers-per-stage 14,14
expect 2 'plan_00\.json: made for gpu "a100-40gb", this run has gpu "h200"' -- simulate --plan "$plan_tmp/plans/kareus/plan_00.json" --gpu h200
expect 0 'iteration time [0-9.]+ s' -- simulate --plan "$plan_tmp/plans/kareus/plan_00.json" --tp 8 --layers-per-stage 15,13
# export takes the plan's workload too.
expect 0 'freqs_pipeline_00000\.py' -- export --plan "$plan_tmp/plans/kareus/plan_00.json" --format artifact --out "$plan_tmp/artifact"
expect 2 'plan_00\.json: made for layers_per_stage \[15, 13\], this run has layers_per_stage \[14, 14\]' -- export --plan "$plan_tmp/plans/kareus/plan_00.json" --layers-per-stage 14,14 --format artifact --out "$plan_tmp/artifact"
rm -rf "$plan_tmp"
