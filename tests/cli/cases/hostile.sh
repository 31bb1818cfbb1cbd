# Hostile input and concurrency (docs/limits.md): deep nesting, huge sizes, non-finite sums,
# two processes on one output, and inputs that used to be accepted silently.
# shellcheck shell=bash

hostile=$(mktemp -d)
deep() { head -c "$1" /dev/zero | tr '\0' '['; }  # $1 opening brackets

# Nesting 90,000 levels deep in a field an error message quotes: exit 2 naming file, line, column.
{ printf '{"name": '; deep 90000; } >"$hostile/gpu.json"
expect 2 'gpu\.json:1:73: JSON nested deeper than 64 levels' -- simulate --clock 1410 --gpu "$hostile/gpu.json"
{ printf '{"name": "m", "hidden": '; deep 90000; } >"$hostile/model.json"
expect 2 'model\.json:1:88: JSON nested deeper than 64 levels' -- partitions --model "$hostile/model.json"
{ printf '{"schema": "kareus.plan/1", "workload": '; deep 90000; } >"$hostile/plan.json"
expect 2 'plan\.json:1:104: JSON nested deeper than 64 levels' -- simulate --plan "$hostile/plan.json"
{ printf '{"schema": '; deep 90000; printf '\n'; } >"$hostile/log.jsonl"
expect 2 'log\.jsonl:1:1:75: JSON nested deeper than 64 levels' -- search --partition fwd_mlp --budget 4 --log "$hostile/log.jsonl"
{ printf '{"schema": "kareus.measurement/1", "ops": '; deep 90000; printf '\n'; } >"$hostile/deep.jsonl"
expect 2 'deep\.jsonl:1:1:106: JSON nested deeper than 64 levels' -- calibrate --measurements "$hostile/deep.jsonl" --out "$hostile/x.json"
# A value that fails a check is quoted as a short excerpt, not dumped whole.
{ printf '{"name": '; deep 60; printf '1'; head -c 60 /dev/zero | tr '\0' ']'; printf '}'; } >"$hostile/gpu60.json"
expect 2 "gpu60\.json: field 'name' must be a string, found \[\[\[\[\[\.\.\.\]\]\]\]\]$" -- partitions --gpu "$hostile/gpu60.json"

# Sizes: every size flag has a range and the GPU count is checked in 64 bits.
expect 2 '--dp 2147483647 must be <= 65536' -- simulate --clock 1410 --dp 2147483647
expect 2 '--tp 8 x --cp 1 x --pp 4 x --dp 65536 = 2097152 GPUs exceeds the limit of 1048576' -- simulate --clock 1410 --pp 4 --dp 65536
expect 2 '--microbatches 100000 must be <= 4096' -- plan --microbatches 100000 --out "$hostile/p"
expect 2 '--devices 2147483647 must be in \[1, 256\]' -- search --partition fwd_mlp --budget 4 --devices 2147483647
expect 2 '--tp-ctas 1:2147483647: expected MIN:MAX\[:STEP\] with 1 <= MIN <= MAX <= 65536' -- partitions --tp-ctas 1:2147483647
expect 2 'Could not convert: --tp-ctas' -- partitions --tp-ctas 1:2147483648
expect 2 '--layers-per-stage 2147483647,2147483647 must list --pp 2 stages summing to the 28 layers' -- partitions --layers-per-stage 2147483647,2147483647
expect 0 '1 clocks \(1410\.\.1410 MHz\)' -- partitions --clocks 1410:1410:2147483647
expect 2 '--microbatches must be in \[1, 4096\], found 2147483647' -- solve --profile tests/data/plan/perseus_csv/valid.csv --stages 2 --microbatches 2147483647 --out "$hostile/s"

# Non-finite sums: huge times are refused naming file and line.
printf 'stage,instruction,frequency,time,energy\n0,forward,1410,1e308,3\n0,backward,1410,1e308,6\n' >"$hostile/huge.csv"
expect 2 'huge\.csv:2: time must be in \(0, 1e\+06\] seconds, found 1e308' -- solve --profile "$hostile/huge.csv" --stages 1 --microbatches 2 --out "$hostile/s"
"$KAREUS" profile --kernels --clocks 1410:1410:15 --kernel-ctas 8:8:1 --out "$hostile/kernels.jsonl" 2>/dev/null
sed '2s/"time_s":[^,]*/"time_s":1e308/' "$hostile/kernels.jsonl" >"$hostile/huge.jsonl"
expect 2 "huge\.jsonl:2: field 'time_s' must be a number in \[0, 1e\+06\], found 1e\+?308" -- calibrate --measurements "$hostile/huge.jsonl" --out "$hostile/x.json"
sed '3s/"freq_mhz":[0-9]*/"freq_mhz":-900/' "$hostile/kernels.jsonl" >"$hostile/negative.jsonl"
expect 2 "negative\.jsonl:3: config: field 'freq_mhz' must be an integer in \[1, 100000\], found -900" -- calibrate --measurements "$hostile/negative.jsonl" --out "$hostile/x.json"
sed '3s/"freq_mhz":[0-9]*/"freq_mhz":1409/' "$hostile/kernels.jsonl" >"$hostile/unsupported.jsonl"
expect 2 'unsupported\.jsonl:3: .*1409' -- calibrate --measurements "$hostile/unsupported.jsonl" --out "$hostile/x.json"
expect 2 "--out $hostile: is a directory, expected a file path" -- profile --partition fwd_mlp --budget 2 --out "$hostile"
expect 2 "--out $hostile: is a directory, expected a file path" -- calibrate --measurements "$hostile/kernels.jsonl" --out "$hostile"

# A file past the input size limit is refused before it is read (a sparse 2 GiB file).
truncate -s 2G "$hostile/huge_sparse.csv"
expect 2 'huge_sparse\.csv: larger than 1073741824 bytes' -- solve --profile "$hostile/huge_sparse.csv" --stages 1 --microbatches 2 --out "$hostile/s"
# A directory where a file belongs says so.
expect 2 "cannot read $hostile: it is a directory" -- solve --profile "$hostile" --stages 1 --microbatches 2 --out "$hostile/s"

# A plan for another workload is refused naming the field.
"$KAREUS" plan --methods megatron --max-plans 2 --out "$hostile/plan" >/dev/null 2>&1
expect 0 'iteration time' -- simulate --plan "$hostile/plan/plans/megatron/plan_00.json"
expect 2 "plan_00\.json: made for dp 1, this run has dp 2" -- simulate --plan "$hostile/plan/plans/megatron/plan_00.json" --dp 2
expect 2 "plan_00\.json: made for model \"llama3\.2-3b\", this run has model \"qwen3-1\.7b\"" -- simulate --plan "$hostile/plan/plans/megatron/plan_00.json" --model qwen3-1.7b
# A plan that records a sequence past its model's learned position table (made before the check)
# is refused naming the file, not taken for a hand-made plan.
python3 - "$hostile/plan/plans/megatron/plan_00.json" "$hostile/gpt3_seq4096.json" \
  "$("$KAREUS" partitions --model gpt3-175b --json)" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
plan["workload"].update(model="gpt3-175b", shape=json.loads(sys.argv[3])["workload"]["shape"], seq=4096,
                        layers_per_stage=[48, 48])
json.dump(plan, open(sys.argv[2], "w"))
PY
# Another model given with a plan is named as such, before the plan's seq meets its table.
expect 2 'plan_00\.json: made for model "llama3\.2-3b", this run has model "gpt3-175b"' -- simulate --plan "$hostile/plan/plans/megatron/plan_00.json" --model gpt3-175b
expect 2 "gpt3_seq4096\.json: workload: --seq 4096 exceeds gpt3-175b's max_positions 2048" -- simulate --plan "$hostile/gpt3_seq4096.json"

# kareus plan checks its output and each method's preconditions before any work.
touch "$hostile/file"
expect 2 "--out $hostile/file: cannot create directory" -- plan --out "$hostile/file"
expect 2 '--methods nanobatch_perseus needs --nanobatches 2, found 1' -- plan --nanobatches 1 --out "$hostile/p"
# A run with fewer plans removes the earlier run's extra plan files.
"$KAREUS" plan --methods megatron,perseus --max-plans 6 --out "$hostile/stale" >/dev/null 2>&1
"$KAREUS" plan --methods megatron,perseus --max-plans 2 --out "$hostile/stale" >/dev/null 2>&1
stale=$(ls "$hostile/stale/plans/perseus")
if [[ $stale == $'plan_00.json\nplan_01.json' ]]; then passed=$((passed + 1)); else
  echo "FAIL: stale plan files after --max-plans 2: $stale"; failed=$((failed + 1)); fi

# Two processes on one output: the second is refused (exit 2) naming the holder's pid.
echo 4242 >"$hostile/held.lock"
(flock 9 && touch "$hostile/locked" && sleep 30) 9>>"$hostile/held.lock" &
holder=$!
for _ in $(seq 200); do [[ -e $hostile/locked ]] && break; sleep 0.05; done
expect 2 "--out $hostile/held: in use by another kareus process \(pid 4242, lock $hostile/held\.lock\)" -- plan --methods megatron --out "$hostile/held"
echo 4343 >"$hostile/log2.jsonl.lock"
rm -f "$hostile/locked"
(flock 9 && touch "$hostile/locked" && sleep 30) 9>>"$hostile/log2.jsonl.lock" &
holder2=$!
for _ in $(seq 200); do [[ -e $hostile/locked ]] && break; sleep 0.05; done
expect 2 "--log $hostile/log2\.jsonl: in use by another kareus process \(pid 4343" -- search --partition fwd_mlp --budget 4 --log "$hostile/log2.jsonl"
kill "$holder" "$holder2" 2>/dev/null
wait "$holder" "$holder2" 2>/dev/null
# Two real searches at once on one log: each exits 0 (it ran first, or resumed the other's
# complete log) or 2 (refused while the other held it), and the log holds each config once.
pids=()
for run in 1 2; do
  "$KAREUS" search --partition fwd_mlp --budget 30 --log "$hostile/shared.jsonl" >/dev/null 2>"$hostile/run$run.err" &
  pids+=($!)
done
codes_ok=1
for run in 1 2; do
  wait "${pids[run - 1]}"
  code=$?
  [[ $code -eq 0 || ($code -eq 2 && $(cat "$hostile/run$run.err") == *"in use by another kareus process"*) ]] || codes_ok=0
done
records=$(($(wc -l <"$hostile/shared.jsonl") - 1))
unique=$(tail -n +2 "$hostile/shared.jsonl" | sed 's/"time_s".*//' | sort -u | wc -l)
if [[ $codes_ok -eq 1 && $records -eq 30 && $unique -eq 30 ]]; then passed=$((passed + 1)); else
  echo "FAIL: two searches on one log: $records records, $unique configs; $(cat "$hostile"/run*.err)"; failed=$((failed + 1)); fi
expect 0 '"from_log": 30,' -- search --partition fwd_mlp --budget 30 --log "$hostile/shared.jsonl" --json
rm -rf "$hostile"
