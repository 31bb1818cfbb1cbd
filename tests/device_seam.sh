#!/usr/bin/env bash
# The planner, compose, search and the pipeline solver reach time and energy only through the
# Device seam (device/device.h): no file of those modules (every file, so that a new one cannot
# slip past) includes the emulator or calls its run_partition / run_serial, except the files
# that assemble devices: planner/*_devices.* (the plan job's devices) and
# planner/overlap_calibration.cpp (which fits the emulator's own overlap model on the exact
# emulator).
set -u
cd "$(dirname "$0")/.."
modules=(planner compose search pipeline)
files=()
for module in "${modules[@]}"; do
  for file in src/"$module"/* include/kareus/"$module"/*; do
    [[ -f $file ]] || continue
    case $(basename "$file") in
      *_devices.* | overlap_calibration.cpp) continue ;;
    esac
    files+=("$file")
  done
done
if [[ ${#files[@]} -lt 40 ]]; then
  echo "device_seam: found only ${#files[@]} files of ${modules[*]}: wrong working directory?"
  exit 1
fi
if grep -n 'emulator\.h\|run_partition\|run_serial' "${files[@]}"; then
  echo "device_seam: the files above bypass the Device seam"
  exit 1
fi
echo "device_seam: ${#files[@]} files of ${modules[*]} use only the Device seam"
