#!/usr/bin/env bash
# One prepared check of the CUDA backend on a GPU session (written for one H200; needs root or
# CAP_SYS_ADMIN to lock clocks). In order, each step bounded by `timeout`:
#   1. configure and build with nvcc (sm_80;sm_90), release, all cores;
#   2. the GPU tests of the device module (CudaDevice*; they skip without a GPU);
#   3. clock-switch latency (max -> min -> max);
#   4. kernels: every GEMM, attention, memory-bound op and TP collective (one-GPU proxy) of one
#      Llama 3.2 3B layer at 8 clocks (collectives at 3 CTA counts), short windows;
#   5. a partition sweep: fwd_attn and fwd_mlp, a seeded sample of 8 configs each;
#   6. calibrate an h200 preset on the kernels and report the held-out error on the partitions.
# Everything lands under $OUT: kernels.jsonl, partitions.jsonl, clock_switch.jsonl, h200.json,
# calibrate.txt, and a log per step. Windows are much shorter than the artifact's 5 s + 5 s so
# that the whole run fits a 15-minute device budget: treat energies as a smoke test, not data.
# Usage: OUT=/tmp/out scripts/device-check.sh   (overrides: GPU, CLOCKS, CTAS, WINDOW, COOLDOWN,
# WARMUP, BUDGET, JOBS)
set -uo pipefail
OUT=${OUT:?set OUT to a writable folder}
GPU=${GPU:-h200}
CLOCKS=${CLOCKS:-1140:1980:120}  # 8 clocks: 1140, 1260, ..., 1980
CTAS=${CTAS:-4:28:12}            # 4, 16, 28
WINDOW=${WINDOW:-0.5}
COOLDOWN=${COOLDOWN:-0.1}
WARMUP=${WARMUP:-0.2}
BUDGET=${BUDGET:-8}
JOBS=${JOBS:-$(nproc)}
BUILD=${BUILD:-build-device}
mkdir -p "$OUT"
status=0
step() {  # step NAME SECONDS COMMAND...: run with a time limit, log to $OUT/NAME.log, keep going
  local name=$1 limit=$2
  shift 2
  echo "== $name (limit ${limit}s): $*"
  local start=$SECONDS
  timeout --signal=TERM --kill-after=10 "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "   rc $rc in $((SECONDS - start)) s; tail of $OUT/$name.log:"
  tail -n 15 "$OUT/$name.log" | sed 's/^/   | /'
  [[ $rc -eq 0 ]] || status=1
  return $rc
}

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >"$OUT/nvidia-smi.csv" 2>&1
cat "$OUT/nvidia-smi.csv"
# The presets assume 15 MHz steps (not confirmed on Hopper): say which requested clocks NVML lacks,
# since measuring one of them fails with an InputError naming NVML's list.
nvidia-smi -i 0 --query-supported-clocks=gr --format=csv,noheader,nounits 2>/dev/null | sort -un >"$OUT/supported_clocks.txt"
IFS=: read -r clock_min clock_max clock_step <<<"$CLOCKS"
for ((clock = clock_min; clock <= clock_max; clock += clock_step)); do
  grep -qx "$clock" "$OUT/supported_clocks.txt" || echo "warning: $clock MHz is not in NVML's supported clocks (see $OUT/supported_clocks.txt)"
done

step configure 120 cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKAREUS_CUDA=ON \
  -DKAREUS_BUILD_BENCH=OFF -DKAREUS_BUILD_PYTHON=OFF || exit 1
step build 420 ninja -C "$BUILD" -j "$JOBS" kareus device_tests fake_nvml || exit 1
KAREUS=$BUILD/tools/kareus

step gpu_tests 120 "$BUILD/tests/device_tests" --gtest_filter='CudaDevice*:Nvml*:ClockLockGuard*'
step clock_switch 60 bash -c "'$KAREUS' profile --backend cuda --gpu '$GPU' --clock-switch --clocks 1140:1980:840 \
  > '$OUT/clock_switch.jsonl'"

rm -f "$OUT/kernels.jsonl" "$OUT/partitions.jsonl"
common=(--backend cuda --gpu "$GPU" --collective proxy --window "$WINDOW" --cooldown "$COOLDOWN" --warmup "$WARMUP")
step kernels 360 "$KAREUS" profile "${common[@]}" --kernels --clocks "$CLOCKS" --kernel-ctas "$CTAS" \
  --out "$OUT/kernels.jsonl"
step partitions 150 "$KAREUS" profile "${common[@]}" --partition fwd_attn --partition fwd_mlp --clocks "$CLOCKS" \
  --budget "$BUDGET" --seed 1 --out "$OUT/partitions.jsonl"

echo "measurements: $(wc -l <"$OUT/kernels.jsonl" 2>/dev/null || echo 0) kernel records," \
  "$(wc -l <"$OUT/partitions.jsonl" 2>/dev/null || echo 0) partition records," \
  "$(grep -c '"stable":false' "$OUT/kernels.jsonl" "$OUT/partitions.jsonl" 2>/dev/null | paste -sd' ') unstable"
inputs=()
[[ -s $OUT/kernels.jsonl ]] && inputs+=("$OUT/kernels.jsonl")
[[ -s $OUT/partitions.jsonl ]] && inputs+=("$OUT/partitions.jsonl")
if [[ ${#inputs[@]} -gt 0 ]]; then
  # --holdout partition: fit on the kernels, report the partitions as held out.
  step calibrate 120 bash -c "'$KAREUS' calibrate --measurements ${inputs[*]} --gpu '$GPU' --out '$OUT/$GPU.json' \
    | tee '$OUT/calibrate.txt'"
fi
echo "device-check: $([[ $status -eq 0 ]] && echo passed || echo 'FAILED (see logs above)')"
exit $status
