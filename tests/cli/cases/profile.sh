# kareus profile / calibrate: backends, flags, and a calibration round trip on emulator data.
# shellcheck shell=bash

# No GPU in CI: the CUDA backend says there is no driver (or that it is not compiled in), exit 1.
expect 1 'no NVIDIA driver|without the CUDA backend' -- profile --backend cuda --partition fwd_attn
expect 2 '--backend gpu: expected cuda or emulator' -- profile --backend gpu --partition fwd_attn
expect 2 'partition' -- profile --partition no_such_key
expect 2 'say what to measure' -- profile
expect 2 '--collective' -- profile --backend cuda --collective mpi --partition fwd_attn
# The emulator prints one kareus.measurement/1 record per sampled config.
expect 0 '"schema":"kareus.measurement/1".*"partition":"fwd_attn"' -- profile --partition fwd_attn --budget 2
expect 0 '"kernel_class":"gemm"' -- profile --kernels --clocks 1410:1410:15 --kernel-ctas 8:8:1

# The numbers of those records: as many as asked, each a distinct config of the GPU's clocks,
# time positive and energy / time between the a100-40gb's static power and its power limit (plus
# 10% for the measurement noise: a GEMM at the top clock runs at the limit).
records_dir=$(mktemp -d)
"$KAREUS" gpus --json >"$records_dir/gpus.json"
"$KAREUS" profile --partition fwd_attn --budget 3 --seed 2 >"$records_dir/search.jsonl" 2>/dev/null
# A kernel sweep is every compute kernel at every clock and every collective at every clock and
# CTA count: 2 clocks x 3 CTA counts from the counts of a 1 x 1 sweep.
"$KAREUS" profile --kernels --clocks 1410:1410:15 --kernel-ctas 8:8:1 >"$records_dir/one.jsonl" 2>/dev/null
"$KAREUS" profile --kernels --clocks 1260:1410:150 --kernel-ctas 8:24:8 >"$records_dir/sweep.jsonl" 2>/dev/null
check "profile records: counts, distinct configs, clocks and power in the GPU's range" python3 - "$records_dir" <<'EOF'
import json, sys
from collections import Counter
folder = sys.argv[1]
gpu = next(g for g in json.load(open(f"{folder}/gpus.json"))["gpus"] if g["name"] == "a100-40gb")
def records(name):
    return [json.loads(line) for line in open(f"{folder}/{name}")]
def check_physical(record):
    freq = record["config"]["freq_mhz"]
    assert gpu["clock_min_mhz"] <= freq <= gpu["clock_max_mhz"] and freq % gpu["clock_step_mhz"] == 0, record["config"]
    assert record["time_s"] > 0, record["time_s"]
    power_w = record["energy_j"] / record["time_s"]
    assert gpu["static_power_w"] <= power_w <= 1.1 * gpu["power_limit_w"], (record["partition"], power_w)
search = records("search.jsonl")
assert len(search) == 3, len(search)
assert {r["partition"] for r in search} == {"fwd_attn"}
assert len({json.dumps(r["config"], sort_keys=True) for r in search}) == 3, "a config measured twice"
one, sweep = records("one.jsonl"), records("sweep.jsonl")
for record in search + one + sweep:
    check_physical(record)
collectives = sum(r["kernel_class"] == "collective" for r in one)
compute = len(one) - collectives
assert collectives > 0 and compute > 0, (compute, collectives)
assert len(sweep) == compute * 2 + collectives * 2 * 3, (len(sweep), compute, collectives)
keys = Counter((r["partition"], r["config"]["freq_mhz"], r["config"]["ctas"], r["kernel_class"]) for r in sweep)
assert max(keys.values()) == 1, keys.most_common(1)
assert {r["config"]["freq_mhz"] for r in sweep} == {1260, 1410}
assert {r["config"]["ctas"] for r in sweep if r["kernel_class"] == "collective"} == {8, 16, 24}
EOF
rm -rf "$records_dir"

profile_dir=$(mktemp -d)
"$KAREUS" profile --kernels --gpu h200 --clocks 1380:1980:120 --kernel-ctas 4:32:7 --out "$profile_dir/kernels.jsonl" 2>/dev/null
"$KAREUS" profile --partition fwd_attn --partition fwd_mlp --gpu h200 --clocks 1380:1980:120 --budget 6 \
  --out "$profile_dir/kernels.jsonl" 2>/dev/null
expect 0 'held-out error after:' -- calibrate --measurements "$profile_dir/kernels.jsonl" --gpu h200 --out "$profile_dir/h200.json"
# The written preset loads, and each fitted value says where it came from.
expect 0 'fwd_attn' -- partitions --gpu "$profile_dir/h200.json"
if grep -q '"source": "\[F\] kareus calibrate on kernels.jsonl"' "$profile_dir/h200.json"; then
  passed=$((passed + 1))
else
  echo "FAIL: calibrated preset lacks the [F] source"
  failed=$((failed + 1))
fi
expect 2 'no such|not exist|does not exist' -- calibrate --measurements "$profile_dir/missing.jsonl" --out "$profile_dir/x.json"
rm -rf "$profile_dir"

# Plans from measurements: profile --all, then plan from the log alone.
measured_dir=$(mktemp -d)
small=(--microbatches 2 --layers-per-stage 15,13 --clocks 1110:1410:150)
expect 0 "measurements in" -- profile --backend emulator --all --seed 5 --out "$measured_dir/m.jsonl" "${small[@]}"
expect 0 "kareus " -- plan --measurements "$measured_dir/m.jsonl" --tp-ctas 6:30:12 --max-plans 2 --out "$measured_dir/A" "${small[@]}"
# The plan replayed from the log reproduces the plan measured on the emulator with the same seed:
# the baseline's fastest plan (no search, each work the mean of 5 logged repeats) within 1%, and
# kareus from the log is no slower than that baseline.
"$KAREUS" plan --seed 5 --tp-ctas 6:30:12 --max-plans 2 --out "$measured_dir/E" "${small[@]}" >/dev/null 2>&1
check "a plan from the log reproduces the emulator's" python3 - "$measured_dir" <<'EOF'
import json, sys
folder = sys.argv[1]
log = [json.loads(line) for line in open(f"{folder}/m.jsonl")]
header, records = log[0], log[1:]
assert header["schema"] == "kareus.profile/1" and header["clocks_mhz"] == [1110, 1260, 1410], header
assert records and all(r["config"]["freq_mhz"] in header["clocks_mhz"] for r in records)
assert all(r["time_s"] > 0 and 85 <= r["energy_j"] / r["time_s"] <= 440 for r in records)
replayed = json.load(open(f"{folder}/A/summary.json"))
emulated = json.load(open(f"{folder}/E/summary.json"))
def fastest(summary, method):
    return summary["methods"][method]["frontier"][0]
for field in ("time_s", "energy_j"):
    ratio = fastest(replayed, "megatron")[field] / fastest(emulated, "megatron")[field]
    assert abs(ratio - 1) < 0.01, (field, ratio)
assert fastest(replayed, "kareus")["time_s"] <= fastest(replayed, "megatron")["time_s"]
EOF
grep -v '"partition":"fwd_mlp"' "$measured_dir/m.jsonl" >"$measured_dir/no_mlp.jsonl"
expect 2 "no measurement of (partition )?fwd_mlp" -- plan --measurements "$measured_dir/no_mlp.jsonl" --tp-ctas 6:30:12 --out "$measured_dir/B" "${small[@]}"
expect 2 "m.jsonl: made for tp 8, this run has tp 4" -- plan --measurements "$measured_dir/m.jsonl" --tp 4 --out "$measured_dir/C" "${small[@]}"
[[ -e $measured_dir/B/summary.json || -e $measured_dir/C/summary.json ]] && { echo "FAIL: a refused plan wrote its output"; failed=$((failed + 1)); }
rm -rf "$measured_dir"
