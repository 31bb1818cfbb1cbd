#!/usr/bin/env bash
# The kareus binary ($KAREUS) end to end: every frontier plan of a quick `kareus plan` (three
# clocks, a 5% search: the round trip is under test, not the planner, whose default run takes a
# minute under the sanitizers) is exported to the artifact's files and imported back unchanged;
# the files parse as Python literals of docs/kareus.md section 10's shapes; `kareus simulate`
# runs an imported plan; and `kareus serve` answers over HTTP and exits 0 on SIGTERM and SIGINT.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/serve_helpers.sh"
export PYTHONPATH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)${PYTHONPATH:+:$PYTHONPATH}"  # serve_client.py
KAREUS=${KAREUS:?set KAREUS to the kareus binary}
tmp=$(mktemp -d)
server_pid=
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

"$KAREUS" plan --clocks 1230:1410:90 --search-budget 0.05 --out "$tmp/out" >/dev/null
for method in kareus perseus megatron; do
  "$KAREUS" export --frontier "$tmp/out/plans/$method" --format artifact --out "$tmp/artifact/$method" >/dev/null
  "$KAREUS" import --format artifact "$tmp/artifact/$method" --out "$tmp/back/$method" >/dev/null
done

python3 - "$tmp" <<'PY'
import ast, json, pathlib, re, sys
root = pathlib.Path(sys.argv[1])
summary = json.loads((root / "out/summary.json").read_text())
frontier = summary["methods"]["kareus"]["frontier"]
assert len(frontier) >= 2, f"expected a kareus frontier, got {len(frontier)} points"
config = re.compile(r"^[a-z]+_[0-9]+-none-[0-9]+-1024$")

checked = 0
for method in ("kareus", "perseus", "megatron"):
    plans = sorted((root / "out/plans" / method).glob("plan_*.json"))
    assert plans, method
    for plan_path in plans:
        number = int(plan_path.stem.split("_")[1])
        original = json.loads(plan_path.read_text())
        back = json.loads((root / "back" / method / f"plan_{number:05d}.json").read_text())
        assert back == original, f"{method} {plan_path.name}: import differs from the plan"
        stages = len(original["stages"])
        freqs = ast.literal_eval((root / "artifact" / method / f"freqs_pipeline_{number:05d}.py").read_text())
        assert isinstance(freqs, list) and len(freqs) == stages
        for stage, entries in enumerate(freqs):
            # The plan's own order (its reader checked it is 1F1B); the sanitized build has no
            # Python module to ask for the order again.
            assert [e[0] for e in entries] == [i["type"] for i in original["stages"][stage]["instructions"]]
            assert all(isinstance(e, tuple) and len(e) == 2 and isinstance(e[1], int) for e in entries)
            assert [e[1] for e in entries] == [i["freq_mhz"] for i in original["stages"][stage]["instructions"]]
        scheds_path = root / "artifact" / method / f"scheds_pipeline_{number:05d}.py"
        overlapped = any(i.get("overlap", "nanobatch" if i["partitions"] else "none") == "nanobatch"
                         for s in original["stages"] for i in s["instructions"])
        assert scheds_path.exists() == overlapped, f"{scheds_path}: exists {scheds_path.exists()}"
        if overlapped:
            scheds = ast.literal_eval(scheds_path.read_text())
            assert len(scheds) == stages
            for stage, entries in enumerate(scheds):
                for entry, instruction in zip(entries, original["stages"][stage]["instructions"], strict=True):
                    assert entry[0] == instruction["type"]
                    assert len(entry) == (3 if entry[0] == "forward" else 5), entry
                    if instruction.get("overlap") == "none":  # kareus ran it without nanobatching
                        assert all(text == "none-none-20-1024" for text in entry[1:]), entry
                        continue
                    assert all(config.match(text) for text in entry[1:]), entry
                    parts = instruction["partitions"]
                    keys = ["fwd_attn", "fwd_mlp"] + (["bwd_attn", "bwd_mlp"] if entry[0] == "backward" else [])
                    assert list(entry[1:]) == [f"{parts[k]['slot']}-none-{parts[k]['ctas']}-1024" for k in keys]
        checked += 1
print(f"interop: {checked} plans round-tripped")
PY

# An imported plan runs on the emulator to the figures the summary gives its original.
first=$(ls "$tmp/back/kareus"/plan_*.json | head -1)
"$KAREUS" simulate --plan "$first" --json >"$tmp/simulated.json"
python3 - "$tmp" "$first" <<'PY'
import json, math, pathlib, sys
root, imported = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
number = int(imported.stem.split("_")[1])
summary = json.loads((root / "out/summary.json").read_text())
point = next(p for p in summary["methods"]["kareus"]["frontier"] if p["plan"] == f"plans/kareus/plan_{number:02d}.json")
simulated = json.loads((root / "simulated.json").read_text())
for key in ("time_s", "energy_j"):
    assert math.isclose(simulated[key], point[key], rel_tol=1e-9), (key, simulated[key], point)
PY

# A malformed scheds entry exits 2 naming the file and entry.
scheds=$(ls "$tmp/artifact/kareus"/scheds_pipeline_*.py | head -1)
sed -i "0,/-none-/s//-linear_0-/" "$scheds"
set +e
message=$("$KAREUS" import --format artifact "$tmp/artifact/kareus" --out "$tmp/bad" 2>&1)
status=$?
set -e
[[ $status -eq 2 ]] || { echo "malformed import exited $status: $message"; exit 1; }
grep -qE "scheds_pipeline_[0-9]{5}\.py:2: stage 0 entry 0 \(fwd_attn\): bad comm config" <<<"$message" ||
  { echo "unexpected message: $message"; exit 1; }

# kareus serve: any free port, JSON over loopback, exit 0 on SIGTERM and on SIGINT.
for signal in TERM INT; do
  # A log per run: the shell truncates the redirect in the child, possibly after serve_port has
  # read the last run's "listening on" line (its port, now closed).
  log=$tmp/serve-$signal.log
  "$KAREUS" serve --frontier "$tmp/out/plans/kareus" --port 0 --results "$tmp/results.jsonl" >"$log" 2>&1 &
  server_pid=$!
  port=$(serve_port "$log") || { echo "kareus serve did not start:"; cat "$log"; exit 1; }
  python3 - "$port" "$tmp/out/summary.json" <<'PY'
import functools, json, sys
from serve_client import call
call = functools.partial(call, int(sys.argv[1]))
info = call("/info")[1]
fastest = min(p["time_s"] for p in json.load(open(sys.argv[2]))["methods"]["kareus"]["frontier"])
assert abs(info["frontier"][0]["time_s"] - fastest) < 1e-9 * fastest, (info["frontier"][0], fastest)
status, job = call("/register_job", {"job_id": "", "pp_degree": 2, "dp_degree": 1, "tp_degree": 8, "world_size": 16})
assert status == 200, job
assert call("/register_rank/" + job, {"rank": 0, "dp_rank": 0, "pp_rank": 0, "tp_rank": 0,
                                      "available_frequencies": []})[0] == 200
status, schedule = call(f"/schedule/{job}?rank=0")
assert status == 200 and len(schedule["frequencies"]) == 16, schedule
assert call("/result/" + job, {"rank": 0, "iter_time": [4.6], "iter_energy": [21000.0]})[0] == 200
status, error = call("/register_job", {"pp_degree": 2, "dp_degree": 1, "tp_degree": 8, "world_size": 8})
assert status == 400 and error["field"] == "world_size", error
PY
  kill -"$signal" "$server_pid"
  set +e
  wait "$server_pid"
  status=$?
  set -e
  server_pid=
  [[ $status -eq 0 ]] || { echo "kareus serve exited $status on SIG$signal:"; cat "$log"; exit 1; }
  grep -q 'kareus serve: stopped' "$log"
done
[[ $(wc -l <"$tmp/results.jsonl") -eq 2 ]] || { echo "expected 2 result lines"; cat "$tmp/results.jsonl"; exit 1; }

# --results at a file that is not a results log (notes without a final newline) is refused,
# and the file is left as it was (it used to be cut to 0 bytes as "a torn last line").
printf 'my notes, no final newline' >"$tmp/notes.txt"
set +e
message=$("$KAREUS" serve --frontier "$tmp/out/plans/kareus" --port 0 --results "$tmp/notes.txt" 2>&1)
status=$?
set -e
[[ $status -eq 2 ]] || { echo "serve --results notes.txt exited $status: $message"; exit 1; }
grep -q -- "--results $tmp/notes.txt: is not a results log" <<<"$message" || { echo "unexpected: $message"; exit 1; }
[[ $(cat "$tmp/notes.txt") == "my notes, no final newline" ]] || { echo "notes.txt changed"; exit 1; }

# --max-body-bytes above 1 MiB takes effect: a /result of 2 x 65,536 values (about 2.4 MB, the
# documented most per list) is accepted; SIGHUP does not stop the server.
log=$tmp/serve-big.log
"$KAREUS" serve --frontier "$tmp/out/plans/kareus" --port 0 --max-body-bytes 4194304 >"$log" 2>&1 &
server_pid=$!
port=$(serve_port "$log") || { echo "kareus serve did not start:"; cat "$log"; exit 1; }
kill -HUP "$server_pid"
python3 - "$port" <<'PY'
import functools, json, sys, time
from serve_client import call
call = functools.partial(call, int(sys.argv[1]))
time.sleep(0.3)  # the SIGHUP has arrived
status, job = call("/register_job", {"job_id": "", "pp_degree": 2, "dp_degree": 1, "tp_degree": 8, "world_size": 16})
assert status == 200, (status, job)
assert call("/register_rank/" + job, {"rank": 0, "dp_rank": 0, "pp_rank": 0, "tp_rank": 0,
                                      "available_frequencies": []})[0] == 200
body = {"rank": 0, "iter_time": [4.654321098765432] * 65536, "iter_energy": [21000.123456789012] * 65536}
size = len(json.dumps(body))
assert 2_000_000 < size < 4_194_304, size
status, answer = call("/result/" + job, body)
assert status == 200, (status, answer)
PY
kill -0 "$server_pid" || { echo "kareus serve died on SIGHUP:"; cat "$log"; exit 1; }
grep -q 'SIGHUP: nothing to reload, still serving' "$log" || { echo "no SIGHUP line:"; cat "$log"; exit 1; }
kill -TERM "$server_pid"
wait "$server_pid"
server_pid=
echo "interop cli: ok"
