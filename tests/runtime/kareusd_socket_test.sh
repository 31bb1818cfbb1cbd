#!/usr/bin/env bash
# End to end over a real socket: the kareusd binary ($KAREUSD) with the fake GPU backend, its
# socket mode and group, an allowed client, a client of another uid (setpriv, needs root),
# refused clocks and GPUs, a SIGHUP reload, and a SIGTERM shutdown that resets a clock a live
# client holds.
set -u
KAREUSD=${KAREUSD:?set KAREUSD to the kareusd binary}
if [[ $(id -u) -ne 0 ]] || ! command -v setpriv >/dev/null || ! getent group nogroup >/dev/null; then
  echo "kareusd_socket: skipped (needs root, setpriv and the nogroup group)"
  exit 77
fi
passed=0
failed=0
check() {  # check NAME CONDITION-EXIT-CODE DETAIL
  if [[ $2 -eq 0 ]]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $1: $3"; fi
}
dir=$(mktemp -d /tmp/kareusd_e2e.XXXXXX)
chmod 755 "$dir"
cp "$KAREUSD" "$dir/kareusd" && chmod 755 "$dir/kareusd"  # reachable by nobody
socket=$dir/k.sock
cat >"$dir/config.json" <<JSON
{"socket_path": "$socket", "socket_group": "nogroup", "allowed_uids": [0], "backend": "fake",
 "fake_gpu_count": 2, "fake_clocks_mhz": [1980, 1410, 1005]}
JSON
"$dir/kareusd" --config "$dir/config.json" 2>"$dir/daemon.log" &
daemon=$!
cleanup() { kill "$daemon" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
for _ in $(seq 400); do [[ -S $socket ]] && break; sleep 0.05; done

mode=$(stat -c '%a %G' "$socket")
[[ $mode == "660 nogroup" ]]; check "socket mode and group" $? "$mode"

out=$("$dir/kareusd" --socket "$socket" --send '{"op":"set","gpu":1,"freq_mhz":1410}' \
  --send '{"op":"get","gpu":1}' --send '{"op":"reset","gpu":1}' --send '{"op":"get","gpu":1}' 2>&1)
[[ $out == $'{"freq_mhz":1410,"ok":true}\n{"freq_mhz":1410,"ok":true}\n{"ok":true}\n{"freq_mhz":1980,"ok":true}' ]]
check "allowed client sets and resets" $? "$out"

out=$(setpriv --reuid=nobody --regid=nogroup --clear-groups "$dir/kareusd" --socket "$socket" \
  --send '{"op":"get","gpu":0}' 2>&1)
status=$?
[[ $status -ne 0 && $out == *"uid 65534 (gid 65534, pid "*") is not allowed to use kareusd"* ]]
check "other uid refused" $? "exit $status: $out"

out=$("$dir/kareusd" --socket "$socket" --send '{"op":"set","gpu":0,"freq_mhz":1500}' \
  --send '{"op":"set","gpu":2,"freq_mhz":1410}' 2>&1)
[[ $out == *"gpu 0 does not support 1500 MHz (supported: 1980, 1410, 1005)"* &&
   $out == *"gpu 2 does not exist: this machine has 2 GPUs (0..1)"* ]]
check "bad clock and gpu refused" $? "$out"

# A second daemon on the live socket is refused (exit 2) and leaves the first one reachable.
out=$("$dir/kareusd" --config "$dir/config.json" 2>&1)
status=$?
[[ $status -eq 2 && $out == *"socket_path $socket: in use by another kareus process (pid $daemon, lock $socket.lock)"* ]]
check "second daemon refused" $? "exit $status: $out"
out=$("$dir/kareusd" --socket "$socket" --send '{"op":"get","gpu":0}' 2>&1)
[[ $out == '{"freq_mhz":1980,"ok":true}' ]]; check "first daemon still answers" $? "$out"

# A config nested 90,000 levels deep is refused with exit 2, not a crash.
{ printf '{"socket_path": '; head -c 90000 /dev/zero | tr '\0' '['; } >"$dir/deep.json"
out=$("$dir/kareusd" --config "$dir/deep.json" 2>&1)
status=$?
[[ $status -eq 2 && $out == *"deep.json:1:80: JSON nested deeper than 64 levels"* ]]
check "deep config refused" $? "exit $status: $out"

# Sends COUNT get requests in one write and prints the replies, one a line, once COUNT came back
# (or the daemon closed).
pipelined_gets() {
  python3 - "$socket" "$1" <<'PY'
import socket, sys
client = socket.socket(socket.AF_UNIX)
client.connect(sys.argv[1])
count = int(sys.argv[2])
client.sendall(b'{"op": "get", "gpu": 0}\n' * count)
data = b""
while data.count(b"\n") < count:
    chunk = client.recv(65536)
    if not chunk:
        break
    data += chunk
sys.stdout.write(data.decode())
PY
}

# 1000 requests pipelined in one write, read only afterwards: every one is answered (over the
# rate limit with an error naming it) and the connection stays open.
pipelined_gets 1000 >"$dir/pipelined"
lines=$(wc -l <"$dir/pipelined")
ok=$(grep -c '"ok":true' "$dir/pipelined")
limited=$(grep -c "rate limit: at most 500 requests per second" "$dir/pipelined")
[[ $lines -eq 1000 && $ok -ge 500 && $((ok + limited)) -eq 1000 ]]
check "pipelined requests all answered" $? "$lines replies, $ok ok, $limited over the rate limit"

# SIGHUP reloads the config: a new rate applies and the daemon keeps serving; a config that does
# not parse is logged and the running one kept.
cp "$dir/config.json" "$dir/config.saved"
sed -i 's/"backend": "fake"/"max_requests_per_second": 2, "backend": "fake"/' "$dir/config.json"
kill -HUP "$daemon"
for _ in $(seq 400); do grep -q "reload: 1 allowed uids" "$dir/daemon.log" && break; sleep 0.05; done
# Ten requests in one write: the daemon reads them together, so on a loaded machine too (where
# three requests one after another could each take half a second) the 2-token bucket refuses some.
out=$(pipelined_gets 10)
[[ $out == *'"rate limit: at most 2 requests per second per client"'* ]]; check "sighup reloads the rate" $? "$out"
echo '{"socket_path": ' >"$dir/config.json"
kill -HUP "$daemon"
for _ in $(seq 400); do grep -q "SIGHUP: not reloaded" "$dir/daemon.log" && break; sleep 0.05; done
out=$("$dir/kareusd" --socket "$socket" --send '{"op":"get","gpu":0}' 2>&1)
[[ $out == '{"freq_mhz":1980,"ok":true}' ]] && grep -q "SIGHUP: not reloaded, the running config stays" "$dir/daemon.log"
check "sighup with a broken config keeps serving" $? "$out; log: $(tail -2 "$dir/daemon.log")"
cp "$dir/config.saved" "$dir/config.json"

# A client that keeps its lease open while the daemon gets SIGTERM.
mkfifo "$dir/hold"
python3 - "$socket" "$dir/hold" <<'PY' &
import socket, sys
client = socket.socket(socket.AF_UNIX)
client.connect(sys.argv[1])
client.sendall(b'{"op": "set", "gpu": 0, "freq_mhz": 1005}\n')
reply = client.recv(256)
with open(sys.argv[2], "w") as hold:
    hold.write(reply.decode())
client.recv(256)  # until the daemon closes
PY
holder=$!
read -r reply <"$dir/hold"
[[ $reply == '{"freq_mhz":1005,"ok":true}' ]]; check "holder locked gpu 0" $? "$reply"
kill -TERM "$daemon"
wait "$daemon"
status=$?
wait "$holder"
grep -q "shutdown: reset gpu 0" "$dir/daemon.log"
check "sigterm resets held clocks" $? "exit $status; log: $(cat "$dir/daemon.log")"
[[ $status -eq 0 && ! -e $socket ]]; check "clean exit removes the socket" $? "exit $status"

echo "kareusd_socket: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
