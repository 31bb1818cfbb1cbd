# kareus solve: Perseus CSV -> frontier.json (sourced by run_cli_tests.sh).
solve_data=$(dirname "${BASH_SOURCE[0]}")/../../data/plan/perseus_csv
solve_out=$(mktemp -d)
expect 0 'frontier points' -- solve --profile "$solve_data/valid.csv" --stages 2 --microbatches 4 --static-power 30 --out "$solve_out/a"
expect 0 'fastest: +0\.162000 s' -- solve --profile "$solve_data/valid.csv" --stages 2 --microbatches 4 --out "$solve_out/b"
expect 0 'within 0\.[0-9]+% of the lower bound' -- solve --profile "$solve_data/valid.csv" --stages 2 --microbatches 4 --static-power 30 --bound --out "$solve_out/d"
# Every frontier point again, independently: its plan's clocks looked up in the CSV, the 1F1B
# schedule timed here (each instruction after its stage's previous one and its data
# dependency), energy = work + 30 W x idle (stages x makespan - busy). The fastest point by
# hand: all at 1410 MHz, F(0,0) + stage 1's 4 x (11 + 22) ms + B(0,3) = 0.162 s, and the brute
# force of solve_job_test gives 73.76 J there; the slowest: the least work (stage 0 at 1200
# MHz, 68.8 J) plus its idle. Points strictly faster-and-dearer in order; bounds below them.
check "solve's frontier points are what their plans give" python3 - "$solve_data/valid.csv" "$solve_out/a" "$solve_out/d" <<'PY'
import csv, json, sys
profile, out, bound_out = sys.argv[1:]
table = {(int(r["stage"]), r["instruction"], int(r["frequency"])): (float(r["time"]), float(r["energy"]))
         for r in csv.DictReader(open(profile))}
def makespan_and_energy(plan, static_w=30.0):
    stages = plan["stages"]
    end, busy, work, cursor = {}, 0.0, 0.0, [0] * len(stages)
    stage_free = [0.0] * len(stages)
    pending = sum(len(s["instructions"]) for s in stages)
    while pending:
        progressed = False
        for s, stage in enumerate(stages):
            if cursor[s] == len(stage["instructions"]):
                continue
            ins = stage["instructions"][cursor[s]]
            kind, m = ins["type"], ins["microbatch"]
            dep = (s - 1, "forward", m) if kind == "forward" else (s + 1, "backward", m)
            if kind == "backward" and s == len(stages) - 1:
                dep = (s, "forward", m)
            if 0 <= dep[0] < len(stages) and dep not in end:
                continue
            t, e = table[(s, kind, ins["freq_mhz"])]
            start = max(stage_free[s], end.get(dep, 0.0))
            end[(s, kind, m)] = stage_free[s] = start + t
            busy, work = busy + t, work + e
            cursor[s] += 1
            pending -= 1
            progressed = True
        assert progressed, "the plan's order deadlocks"
    span = max(stage_free)
    return span, work + static_w * (len(stages) * span - busy)
front = json.load(open(f"{out}/frontier.json"))["points"]
assert len(front) >= 2, front
for point in front:
    plan = json.load(open(f"{out}/{point['plan']}"))
    span, energy = makespan_and_energy(plan)
    assert abs(span - point["time_s"]) < 1e-9 and abs(energy - point["energy_j"]) < 1e-9, (point, span, energy)
for a, b in zip(front, front[1:]):
    assert a["time_s"] < b["time_s"] and a["energy_j"] > b["energy_j"], (a, b)
assert abs(front[0]["time_s"] - 0.162) < 1e-12 and abs(front[0]["energy_j"] - 73.76) < 1e-9, front[0]
slowest = json.load(open(f"{out}/{front[-1]['plan']}"))
assert all(i["freq_mhz"] == 1200 for i in slowest["stages"][0]["instructions"]), slowest["stages"][0]
work = 4 * (2.6 + 5.1) + 4 * (3.2 + 6.3)
assert abs(front[-1]["energy_j"] - (work + 30 * (2 * front[-1]["time_s"] - 4 * (0.036 + 0.033)))) < 1e-9, front[-1]
bounded = json.load(open(f"{bound_out}/solve.json"))["points"]
assert [(p["time_s"], p["energy_j"]) for p in bounded] == [(p["time_s"], p["energy_j"]) for p in front]
assert all(0 < p["lower_bound_energy_j"] <= p["energy_j"] + 1e-9 for p in bounded), bounded
PY
if [[ ! -f $solve_out/a/frontier.json || ! -f $solve_out/a/plans/plan_0000.json ]]; then
  echo "FAIL: kareus solve did not write frontier.json and plans/plan_0000.json"
  failed=$((failed + 1))
fi
expect 2 'short_line\.csv:3: expected 5 fields' -- solve --profile "$solve_data/short_line.csv" --stages 1 --microbatches 2 --out "$solve_out/c"
expect 2 'stage_out_of_range\.csv:6: stage 2 is out of range for --stages 2' -- solve --profile "$solve_data/stage_out_of_range.csv" --stages 2 --microbatches 2 --out "$solve_out/c"
expect 2 'missing_stage\.csv: no rows for stage 1' -- solve --profile "$solve_data/missing_stage.csv" --stages 2 --microbatches 2 --out "$solve_out/c"
expect 2 'cannot read .*no_such\.csv' -- solve --profile "$solve_data/no_such.csv" --stages 1 --microbatches 2 --out "$solve_out/c"
expect 2 '^kareus solve: error: --out /proc/kareus' -- solve --profile "$solve_data/valid.csv" --stages 2 --microbatches 2 --out /proc/kareus
expect 2 'unit-time' -- solve --profile "$solve_data/valid.csv" --stages 2 --microbatches 2 --unit-time -1 --out "$solve_out/c"
expect 2 'unit-time 1e-09 s .* use a larger --unit-time' -- solve --profile "$solve_data/valid.csv" --stages 2 --microbatches 4 --unit-time 1e-9 --out "$solve_out/c"
expect 2 'stages' -- solve --profile "$solve_data/valid.csv" --stages 0 --microbatches 2 --out "$solve_out/c"
# --deadline: a makespan to polish the plan at, kept in --max-points' sample.
expect 2 'deadline' -- solve --profile "$solve_data/valid.csv" --stages 2 --microbatches 4 --deadline 0 --out "$solve_out/c"
expect 2 'deadline.*inf' -- solve --profile "$solve_data/valid.csv" --stages 2 --microbatches 4 --deadline inf --out "$solve_out/c"
too_many_deadlines=()
for k in $(seq 65); do too_many_deadlines+=(--deadline "0.$((200 + k))"); done
expect 2 '--deadline given 65 times, at most 64' -- solve --profile "$solve_data/valid.csv" --stages 2 --microbatches 4 "${too_many_deadlines[@]}" --out "$solve_out/c"
expect 0 'frontier points' -- solve --profile "$solve_data/valid.csv" --stages 2 --microbatches 4 --static-power 30 --max-points 2 --deadline 0.168 --out "$solve_out/e"
check "solve keeps the plan at an asked deadline in --max-points" python3 - "$solve_out/a" "$solve_out/e" <<'PY'
import json, sys
every = json.load(open(f"{sys.argv[1]}/frontier.json"))["points"]
sampled = json.load(open(f"{sys.argv[2]}/frontier.json"))["points"]
assert len(sampled) == 3, sampled
by = [p for p in sampled if p["time_s"] <= 0.168]
assert by and by[-1]["energy_j"] <= min(p["energy_j"] for p in every if p["time_s"] <= 0.168) + 1e-9, (by, every)
assert sampled[0]["time_s"] == every[0]["time_s"] and sampled[-1]["energy_j"] <= every[-1]["energy_j"] + 1e-9, sampled
PY
# The search at asked deadlines draws its perturbations from a fixed seed: the same input gives
# the same frontier and plans (solve.json differs only in the solver's time).
for run in f g; do
  expect 0 'frontier points' -- solve --profile "$solve_data/valid.csv" --stages 2 --microbatches 4 --static-power 30 --deadline 0.168 --deadline 0.2 --out "$solve_out/$run"
done
check "solve at asked deadlines gives the same plans twice" diff -r -x solve.json "$solve_out/f" "$solve_out/g"
expect 2 'required' -- solve --profile "$solve_data/valid.csv" --stages 2 --out "$solve_out/c"
if [[ -e $solve_out/c/frontier.json ]]; then
  echo "FAIL: a failed kareus solve left $solve_out/c/frontier.json"
  failed=$((failed + 1))
fi
rm -rf "$solve_out"
