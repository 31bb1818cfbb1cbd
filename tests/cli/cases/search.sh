# kareus search: per-partition search on the emulator, its JSON, the log and its errors.
# shellcheck shell=bash

search_tmp=$(mktemp -d)
# fwd_ao_ar of CP2 TP4: 18 clocks x 10 CTA counts x 1 slot = 180 configs; default budget 10% = 18.
expect 0 '"space_size": 180' -- search --partition fwd_ao_ar --cp 2 --tp 4 --slots artifact --json
expect 0 '"evaluations": 18,' -- search --partition fwd_ao_ar --cp 2 --tp 4 --slots artifact --json
expect 0 '"effective_energy": (0\.9[0-9]*|1(\.0+)?),?$' -- search --partition fwd_ao_ar --cp 2 --tp 4 --slots artifact --json
expect 0 '"frontier": \[' -- search --partition fwd_mlp --budget 20 --json
expect 0 '"stop_reason": "space_exhausted"' -- search --partition fwd_ao_ar --cp 2 --tp 4 --slots artifact --exhaustive --json
expect 0 '"strategy": "artifact"' -- search --partition fwd_mlp --budget 20 --strategy artifact --json
# The reports' numbers: the exhaustive run measured the whole space, so what it evaluated is the
# truth (hypervolume ratio exactly 1); the 10% run spent exactly its budget and found at most
# the truth. Both fronts are time-ascending and strictly cheaper (energy, and energy - 85 W x
# time for A100's static power) point after point, and every config lies in the space: 18
# artifact clocks 1410, 1380, ..., 900 MHz, TP CTA counts 3, 6, ..., 30, the one slot attn_0.
"$KAREUS" search --partition fwd_ao_ar --cp 2 --tp 4 --slots artifact --exhaustive --json >"$search_tmp/exhaustive.json" 2>/dev/null
"$KAREUS" search --partition fwd_ao_ar --cp 2 --tp 4 --slots artifact --json >"$search_tmp/budget.json" 2>/dev/null
check "search reports: budgets, ratios, fronts in the space" python3 - "$search_tmp/exhaustive.json" "$search_tmp/budget.json" <<'PY'
import json, sys
exhaustive, budget = (json.load(open(path)) for path in sys.argv[1:])
assert (exhaustive["space_size"], exhaustive["budget"], exhaustive["evaluations"]) == (180, 180, 180), exhaustive
assert exhaustive["stop_reason"] == "space_exhausted" and exhaustive["strategy"] == "exhaustive"
assert exhaustive["hypervolume_ratio"] == {"energy": 1.0, "effective_energy": 1.0}, exhaustive["hypervolume_ratio"]
assert (budget["budget"], budget["evaluations"], budget["from_log"]) == (18, 18, 0), budget
for ratios in (budget["hypervolume_ratio"], budget["front_hypervolume_ratio"], exhaustive["front_hypervolume_ratio"]):
    assert all(0 < value <= 1 for value in ratios.values()), ratios
clocks, ctas = {1410 - 30 * k for k in range(18)}, set(range(3, 31, 3))
for report in (exhaustive, budget):
    assert report["static_power_w"] == 85.0
    for name, cost in (("frontier", lambda p: p["energy_j"]),
                       ("effective_energy_frontier", lambda p: p["energy_j"] - 85.0 * p["time_s"])):
        front = report[name]
        assert front, name
        for a, b in zip(front, front[1:]):
            assert a["time_s"] < b["time_s"] and cost(a) > cost(b), (name, a, b)
        for point in front:
            config = point["config"]
            assert config["freq_mhz"] in clocks and config["ctas"] in ctas and config["slot"] == "attn_0", config
PY
expect 0 'fwd_mlp of llama3.2-3b on a100-40gb: 20 of 720 configs measured' -- search --partition fwd_mlp --budget 20
# The log: a second run takes every measurement from it.
expect 0 '"from_log": 0,' -- search --partition fwd_mlp --budget 20 --log "$search_tmp/fwd_mlp.jsonl" --json
expect 0 '"from_log": 20,' -- search --partition fwd_mlp --budget 20 --log "$search_tmp/fwd_mlp.jsonl" --json
expect 0 '"from_log": 20,' -- search --partition fwd_mlp --budget 20 --devices 3 --batch 2 --log "$search_tmp/fwd_mlp.jsonl" --json
printf '{"config": {"freq_mhz": 9' >>"$search_tmp/fwd_mlp.jsonl"
expect 0 'warning: .*fwd_mlp\.jsonl:22: a torn last line .*; cut off' -- search --partition fwd_mlp --budget 20 --log "$search_tmp/fwd_mlp.jsonl"

# Bad input exits 2 and names the flag or file.
expect 2 'error: --partition fwd_nope' -- search --partition fwd_nope
expect 2 'error: --budget 0 must be between 1 and the space size 720' -- search --partition fwd_mlp --budget 0
expect 2 'error: --budget 721 must be between 1 and the space size 720' -- search --partition fwd_mlp --budget 721
expect 2 'error: --strategy bayes' -- search --partition fwd_mlp --strategy bayes
expect 2 'fwd_mlp\.jsonl:1: the log is for partition .fwd_mlp., not .fwd_attn.' -- search --partition fwd_attn --budget 20 --log "$search_tmp/fwd_mlp.jsonl"
expect 2 'fwd_mlp\.jsonl:1: the log is for seed 0, not 4' -- search --partition fwd_mlp --budget 20 --seed 4 --log "$search_tmp/fwd_mlp.jsonl"
expect 2 'fwd_mlp\.jsonl:1: the log is for workload' -- search --partition fwd_mlp --budget 20 --mbs 16 --log "$search_tmp/fwd_mlp.jsonl"
expect 2 "error: --log $search_tmp: cannot" -- search --partition fwd_mlp --budget 20 --log "$search_tmp"
echo 'garbage' >"$search_tmp/garbage.jsonl"
echo 'garbage' >>"$search_tmp/garbage.jsonl"
expect 2 'garbage\.jsonl:1: corrupt line' -- search --partition fwd_mlp --budget 20 --log "$search_tmp/garbage.jsonl"
rm -rf "$search_tmp"
