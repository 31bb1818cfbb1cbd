#!/usr/bin/env bash
# One prepared check of the CUDA backend on a GPU session (written for one H200; needs root or
# CAP_SYS_ADMIN to lock clocks). In order, each step bounded by `timeout`:
#   1. configure and build with nvcc (sm_80;sm_90), release, all cores; skipped when KAREUS and
#      DEVICE_TESTS name prebuilt binaries (the GPU image may lack fmt/CLI11/GTest dev files);
#   2. the GPU tests of the device module (CudaDevice*; they skip without a GPU or permission),
#      then kareusd's NVML backend (scripts/device_kareusd_check.py: lock, and every way a lease
#      ends resets the clock, read under a GEMM load; needs python3 with torch and nvidia-ml-py);
#   3. clock-switch latency (min -> max -> min of CLOCKS);
#   4. kernels: every GEMM, attention, memory-bound op and TP collective (one-GPU proxy) of one
#      Llama 3.2 3B layer at 8 clocks (collectives at 3 CTA counts), short windows;
#   5. a partition sweep: fwd_attn and fwd_mlp, a seeded sample of BUDGET configs each;
#   6. calibrate an h200 preset on the kernels and report the held-out error on the partitions.
# Under $OUT (at most 8 files, as the device tool returns): device-check.log (every step's
# output), kareusd.json, clock_switch.jsonl, kernels.jsonl, partitions.jsonl, $GPU.json, calibrate.txt.
# Windows are much shorter than the artifact's 5 s + 5 s so that the run fits a 15-minute
# device budget: treat its energies as a smoke test and a first calibration, not final data.
# Usage: OUT=/tmp/out scripts/device-check.sh   (overrides: GPU, CLOCKS, CTAS, WINDOW, COOLDOWN,
# WARMUP, BUDGET, JOBS, BUILD, KAREUS, DEVICE_TESTS, PREBUILT)
#
# The GPU image has nvcc, CMake and ninja but not necessarily fmt, nlohmann-json, CLI11, Eigen
# and GTest, so the dependable way is to build here and carry the binaries:
#   here:   scripts/device-check.sh prepare      # builds build/, strips into build/devrun/
#   there:  PREBUILT=build/devrun scripts/device-check.sh   (device tool: carry ["build/devrun"])
set -uo pipefail
if [[ ${1:-} == prepare ]]; then
  set -e
  BUILD=${BUILD:-build}
  ninja -C "$BUILD" -j1 kareus device_tests kareusd
  mkdir -p "$BUILD/devrun"
  strip -o "$BUILD/devrun/kareus" "$BUILD/tools/kareus"
  strip -o "$BUILD/devrun/device_tests" "$BUILD/tests/device_tests"
  strip -o "$BUILD/devrun/kareusd" "$BUILD/tools/kareusd/kareusd"
  # Shared libraries the image may lack (not the CUDA ones, which it has, nor libc/libstdc++).
  for library in $(ldd "$BUILD"/devrun/{kareus,device_tests,kareusd} | awk '/=> \// {print $3}' | sort -u); do
    case $(basename "$library") in
      libcuda* | libcublas* | libnccl* | libc.so* | libm.so* | libstdc++* | libgcc_s* | libdl* | libpthread* | librt*) ;;
      *) cp -L "$library" "$BUILD/devrun/" ;;
    esac
  done
  du -sh "$BUILD/devrun"
  exit 0
fi
if [[ -n ${PREBUILT:-} ]]; then
  PREBUILT=$(cd "$PREBUILT" && pwd)
  KAREUS=$PREBUILT/kareus
  DEVICE_TESTS=$PREBUILT/device_tests
  KAREUSD=$PREBUILT/kareusd
  export LD_LIBRARY_PATH=$PREBUILT${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
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
LOG=$OUT/device-check.log
: >"$LOG"
status=0
step() {  # step NAME SECONDS COMMAND...: run with a time limit, append to $LOG, keep going
  local name=$1 limit=$2
  shift 2
  echo "== $name (limit ${limit}s): $*" | tee -a "$LOG"
  local start=$SECONDS
  timeout --signal=TERM --kill-after=10 "$limit" "$@" >"$OUT/step.tmp" 2>&1
  local rc=$?
  cat "$OUT/step.tmp" >>"$LOG"
  echo "   rc $rc in $((SECONDS - start)) s" | tee -a "$LOG"
  tail -n 12 "$OUT/step.tmp" | sed 's/^/   | /'
  rm -f "$OUT/step.tmp"
  [[ $rc -eq 0 ]] || status=1
  return $rc
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv 2>&1 | tee -a "$LOG"
# The presets assume 15 MHz steps (not confirmed on Hopper): say which requested clocks NVML lacks,
# since measuring one of them fails with an InputError naming NVML's list.
supported=$(nvidia-smi -i 0 --query-supported-clocks=gr --format=csv,noheader,nounits 2>/dev/null | sort -un | tr '\n' ' ')
echo "supported SM clocks: $supported" >>"$LOG"
IFS=: read -r clock_min clock_max clock_step <<<"$CLOCKS"
for ((clock = clock_min; clock <= clock_max; clock += clock_step)); do
  [[ " $supported " == *" $clock "* ]] || echo "warning: $clock MHz is not in NVML's supported clocks" | tee -a "$LOG"
done

if [[ -n ${KAREUS:-} && -n ${DEVICE_TESTS:-} ]]; then
  echo "prebuilt: $KAREUS, $DEVICE_TESTS" | tee -a "$LOG"
else
  step configure 120 cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKAREUS_CUDA=ON \
    -DKAREUS_BUILD_BENCH=OFF -DKAREUS_BUILD_PYTHON=OFF || exit 1
  step build 420 ninja -C "$BUILD" -j "$JOBS" kareus device_tests kareusd || exit 1
  KAREUS=$BUILD/tools/kareus
  DEVICE_TESTS=$BUILD/tests/device_tests
  KAREUSD=$BUILD/tools/kareusd/kareusd
fi
# cuBLASLt and NCCL may live in pip wheels (nvidia-cublas, nvidia-nccl-cu13) rather than the toolkit.
for library in libcublasLt.so.13 libnccl.so.2 libcudart.so.13; do
  if ! ldconfig -p | grep -q "$library"; then
    found=$(find /usr/local/cuda*/ /opt /usr/lib -name "$library" 2>/dev/null | head -n 1)
    [[ -n $found ]] && LD_LIBRARY_PATH=$(dirname "$found")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
done
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
ldd "$KAREUS" | grep -E "cublas|nccl|cudart|fmt|not found" | tee -a "$LOG"

step gpu_tests 180 "$DEVICE_TESTS" --gtest_filter='CudaDevice*'
if [[ -n ${KAREUSD:-} && -x $KAREUSD ]]; then
  step kareusd 90 python3 "$(dirname "$0")/device_kareusd_check.py" "$KAREUSD" "$OUT/kareusd.json"
fi
step clock_switch 60 bash -c "'$KAREUS' profile --backend cuda --gpu '$GPU' --clock-switch \
  --clocks $clock_min:$clock_max:$((clock_max - clock_min)) > '$OUT/clock_switch.jsonl'"

rm -f "$OUT/kernels.jsonl" "$OUT/partitions.jsonl"
common=(--backend cuda --gpu "$GPU" --collective proxy --window "$WINDOW" --cooldown "$COOLDOWN" --warmup "$WARMUP")
step kernels 420 "$KAREUS" profile "${common[@]}" --kernels --clocks "$CLOCKS" --kernel-ctas "$CTAS" \
  --out "$OUT/kernels.jsonl"
step partitions 150 "$KAREUS" profile "${common[@]}" --partition fwd_attn --partition fwd_mlp --clocks "$CLOCKS" \
  --budget "$BUDGET" --seed 1 --out "$OUT/partitions.jsonl"

kernel_records=$(cat "$OUT/kernels.jsonl" 2>/dev/null | wc -l)
partition_records=$(cat "$OUT/partitions.jsonl" 2>/dev/null | wc -l)
unstable=$(cat "$OUT/kernels.jsonl" "$OUT/partitions.jsonl" 2>/dev/null | grep -c '"stable":false')
echo "measurements: $kernel_records kernel records, $partition_records partition records, $unstable unstable" | tee -a "$LOG"
inputs=()
[[ -s $OUT/kernels.jsonl ]] && inputs+=("$OUT/kernels.jsonl")
[[ -s $OUT/partitions.jsonl ]] && inputs+=("$OUT/partitions.jsonl")
if [[ $kernel_records -gt 0 ]]; then
  # --holdout partition (the default): fit on the kernels, report the partitions as held out.
  step calibrate 120 bash -c "'$KAREUS' calibrate --measurements ${inputs[*]} --gpu '$GPU' --out '$OUT/$GPU.json' \
    > '$OUT/calibrate.txt'"
  cat "$OUT/calibrate.txt" 2>/dev/null
fi
echo "device-check: $([[ $status -eq 0 ]] && echo passed || echo 'FAILED (see the log above)')" | tee -a "$LOG"
exit $status
