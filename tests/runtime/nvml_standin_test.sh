#!/usr/bin/env bash
# kareusd's real NVML path against the stand-in libnvidia-ml.so.1 (tests/nvml_standin), loaded
# the normal way (LD_LIBRARY_PATH, nvml_library "libnvidia-ml.so.1"), whose GPU state lives in a
# file and so outlives every process here, as a GPU's clocks do. Every way out must leave the
# clocks at the driver's default within 2 s: the client's reset, the client's exit, SIGKILL of
# the client, SIGTERM of kareusd, and SIGKILL of kareusd followed by a restart (the new daemon
# resets what its record names). NVML faults reach the client as kareusd replies that name them.
# Bounded: about 10 s.
set -u
KAREUSD=${KAREUSD:?set KAREUSD to the kareusd binary}
STANDIN_DIR=${STANDIN_DIR:?set STANDIN_DIR to the folder of the stand-in libnvidia-ml.so.1}
PYTHON=${PYTHON:-python3}
passed=0
failed=0
check() {  # check NAME CONDITION-EXIT-CODE DETAIL
  if [[ $2 -eq 0 ]]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $1: $3"; fi
}
dir=$(mktemp -d /tmp/kareusd_nvml.XXXXXX)
socket=$dir/k.sock
export KAREUS_NVML_STANDIN_STATE=$dir/gpu.state
export LD_LIBRARY_PATH=$STANDIN_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cat >"$dir/config.json" <<JSON
{"socket_path": "$socket", "allowed_uids": [$(id -u)], "backend": "nvml", "nvml_library": "libnvidia-ml.so.1"}
JSON
daemon=
holder=
start_daemon() {
  "$KAREUSD" --config "$dir/config.json" 2>>"$dir/daemon.log" &
  daemon=$!
  for _ in $(seq 200); do [[ -S $socket ]] && return; sleep 0.01; done
}
cleanup() {
  [[ -n $holder ]] && kill -9 "$holder" 2>/dev/null
  [[ -n $daemon ]] && kill -9 "$daemon" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
locked() { sed -n "s/^gpu $1 locked_mhz //p" "$KAREUS_NVML_STANDIN_STATE"; }
# Waits up to 2 s for GPU $1 to be at the driver default (unlocked).
unlocked_within_2s() {
  for _ in $(seq 200); do [[ $(locked "$1") == 0 ]] && return 0; sleep 0.01; done
  return 1
}
send() { "$KAREUSD" --socket "$socket" "${@/#/--send=}" 2>&1; }
# A client that locks GPU $1 to $2 MHz and holds the lease until killed (its pid in $holder).
hold() {
  "$PYTHON" -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(b"{\"op\": \"set\", \"gpu\": %s, \"freq_mhz\": %s}\n" % (sys.argv[2].encode(), sys.argv[3].encode()))
print(s.recv(4096).decode().strip(), flush=True)
time.sleep(60)' "$socket" "$1" "$2" >"$dir/holder.out" &
  holder=$!
  for _ in $(seq 200); do [[ -s $dir/holder.out ]] && return; sleep 0.01; done
}

start_daemon
out=$(send '{"op":"set","gpu":0,"freq_mhz":1005}' '{"op":"get","gpu":0}' '{"op":"supported","gpu":1}')
[[ $out == '{"freq_mhz":1005,"ok":true}'$'\n''{"freq_mhz":1005,"ok":true}'$'\n''{"clocks_mhz":[1410,1395,'* ]]
check "set through NVML" $? "$out"
unlocked_within_2s 0; check "client exit resets" $? "$(locked 0)"

out=$(send '{"op":"energy","gpu":0}')
e1=$(sed -n 's/.*"energy_mj":\([0-9]*\).*/\1/p' <<<"$out")
sleep 0.3
out=$(send '{"op":"energy","gpu":0}')
e2=$(sed -n 's/.*"energy_mj":\([0-9]*\).*/\1/p' <<<"$out")
# 300 W unlocked for 0.3 s (+ the process starts), counted in 100 ms steps: 60..600 J apart.
[[ -n $e1 && -n $e2 ]] && (( e2 - e1 >= 60000 && e2 - e1 <= 600000 )); check "energy counts" $? "$e1 -> $e2"

hold 1 1200
[[ $(cat "$dir/holder.out") == '{"freq_mhz":1200,"ok":true}' && $(locked 1) == 1200 ]]
check "client holds gpu 1" $? "$(cat "$dir/holder.out") $(locked 1)"
kill -9 "$holder"; wait "$holder" 2>/dev/null; holder=
unlocked_within_2s 1; check "SIGKILL of the client resets" $? "$(locked 1)"

# SIGKILL of kareusd while a client holds gpu 1: nothing can reset then, so the GPU stays locked
# (what the issue's probe saw); the new daemon finds its record and resets it.
hold 1 1005
[[ $(locked 1) == 1005 ]]; check "locked before the daemon dies" $? "$(locked 1)"
kill -9 "$daemon"; wait "$daemon" 2>/dev/null
kill -9 "$holder"; wait "$holder" 2>/dev/null; holder=
[[ $(locked 1) == 1005 && $(cat "$socket.leases" 2>&1) == $'kareusd.leases/1\n1' ]]
check "a killed daemon leaves the lock and its record" $? "$(locked 1) $(cat "$socket.leases" 2>&1)"
start_daemon
unlocked_within_2s 1; check "restart resets what the previous daemon left locked" $? "$(locked 1)"
grep -q "reset gpu 1, left locked by a previous kareusd" "$dir/daemon.log"; check "restart logs it" $? "$(cat "$dir/daemon.log")"
[[ ! -e $socket.leases ]]; check "record gone once nothing is locked" $? "$(ls "$dir")"

# A second daemon on the same socket is refused (exit 2) and the first keeps its lock record.
"$KAREUSD" --config "$dir/config.json" 2>"$dir/second.log"
[[ $? -eq 2 ]] && grep -q "in use by another kareus process" "$dir/second.log"
check "second daemon refused" $? "$(cat "$dir/second.log")"

# NVML faults come back as replies that name the call, the error and what to do.
fault() { flock "$KAREUS_NVML_STANDIN_STATE" -c "echo 'fault $1 $2' >>'$KAREUS_NVML_STANDIN_STATE'"; }
clear_faults() { flock "$KAREUS_NVML_STANDIN_STATE" -c "sed -i '/^fault /d' '$KAREUS_NVML_STANDIN_STATE'"; }
fault nvmlDeviceSetGpuLockedClocks 4
out=$(send '{"op":"set","gpu":0,"freq_mhz":1005}')
[[ $out == *'"ok":false'* && $out == *'Insufficient Permissions (NVML error 4)'* && $out == *CAP_SYS_ADMIN* ]]
check "NO_PERMISSION explained" $? "$out"
clear_faults
fault nvmlDeviceSetGpuLockedClocks 15
out=$(send '{"op":"set","gpu":0,"freq_mhz":1005}')
[[ $out == *'GPU is lost (NVML error 15)'* && $out == *'fell off the bus'* ]]; check "GPU_IS_LOST explained" $? "$out"
clear_faults
fault nvmlDeviceGetTotalEnergyConsumption 3
out=$(send '{"op":"energy","gpu":0}')
[[ $out == *'Not Supported (NVML error 3)'* ]]; check "NOT_SUPPORTED energy explained" $? "$out"
clear_faults
# A reset that fails when the lease ends: the lock stays, the daemon says so loudly, and the
# record keeps naming the GPU so that the next start resets it.
hold 0 810
fault nvmlDeviceResetGpuLockedClocks 15
kill -9 "$holder"; wait "$holder" 2>/dev/null; holder=
for _ in $(seq 200); do grep -q "released the lease anyway: gpu 0: reset failed" "$dir/daemon.log" && break; sleep 0.01; done
grep -q "released the lease anyway: gpu 0: reset failed.*GPU is lost" "$dir/daemon.log"
check "failed reset is logged" $? "$(tail -3 "$dir/daemon.log")"
[[ $(locked 0) == 810 && $(cat "$socket.leases" 2>&1) == $'kareusd.leases/1\n0' ]]
check "failed reset stays in the record" $? "$(locked 0) $(cat "$socket.leases" 2>&1)"
clear_faults

# SIGTERM of kareusd resets what a live client holds and removes the record.
hold 1 1410
kill -TERM "$daemon"; wait "$daemon"; code=$?; daemon=
[[ $code -eq 0 && $(locked 1) == 0 && $(locked 0) == 0 && ! -e $socket.leases ]]
check "SIGTERM of kareusd resets" $? "exit $code, gpu 0 $(locked 0), gpu 1 $(locked 1)"
kill -9 "$holder" 2>/dev/null; wait "$holder" 2>/dev/null; holder=

echo "nvml_standin: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
