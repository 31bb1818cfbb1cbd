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
grep -v '"partition":"fwd_mlp"' "$measured_dir/m.jsonl" >"$measured_dir/no_mlp.jsonl"
expect 2 "no measurement of (partition )?fwd_mlp" -- plan --measurements "$measured_dir/no_mlp.jsonl" --tp-ctas 6:30:12 --out "$measured_dir/B" "${small[@]}"
expect 2 "m.jsonl: made for tp 8, this run has tp 4" -- plan --measurements "$measured_dir/m.jsonl" --tp 4 --out "$measured_dir/C" "${small[@]}"
[[ -e $measured_dir/B/summary.json || -e $measured_dir/C/summary.json ]] && { echo "FAIL: a refused plan wrote its output"; failed=$((failed + 1)); }
rm -rf "$measured_dir"
