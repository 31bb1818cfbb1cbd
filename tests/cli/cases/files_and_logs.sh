# Files in, outputs out, measurement logs (docs/limits.md): inputs that are not regular files,
# output folders replaced whole or not at all, a lock on every --out, logs with torn tails, and a
# plan the runtime would stop on.
# shellcheck shell=bash

files=$(mktemp -d)
same_tree() { diff -r "$1" "$2" >/dev/null 2>&1; }
csv=$(dirname "${BASH_SOURCE[0]}")/../../data/plan/perseus_csv/valid.csv

# A FIFO given as an input is refused at once (it used to block the open for ever).
mkfifo "$files/profile.csv"
expect 2 "cannot read $files/profile\.csv: it is a FIFO, expected a regular file" -- \
  solve --profile "$files/profile.csv" --stages 2 --microbatches 4 --out "$files/fifo_out"
expect 2 'cannot read /dev/zero: it is a character device' -- simulate --plan /dev/zero

# A failed re-import leaves the good import it was replacing exactly as it was (it used to
# delete its frontier.json first).
"$KAREUS" solve --profile "$csv" --stages 2 --microbatches 4 --max-points 3 --out "$files/solved" >/dev/null
"$KAREUS" plan --methods megatron,perseus --max-plans 3 --out "$files/plan" >/dev/null 2>&1
"$KAREUS" export --frontier "$files/plan/plans/perseus" --format artifact --out "$files/artifact" >/dev/null
"$KAREUS" import --format artifact "$files/artifact" --out "$files/back" >/dev/null
cp -r "$files/back" "$files/back.before"
cp -r "$files/artifact" "$files/broken"
printf "[\n[('forward', 01410)],\n]\n" >"$files/broken/freqs_pipeline_00001.py"
expect 2 'freqs_pipeline_00001\.py:2: leading zeros in the integer .01410.' -- \
  import --format artifact "$files/broken" --out "$files/back"
check "a failed import changed the previous import" same_tree "$files/back" "$files/back.before"
# A failed export leaves the previous export whole (the first file used to be replaced already).
cp -r "$files/artifact" "$files/artifact.before"
mkdir -p "$files/mixed" && cp "$files/plan/plans/megatron/plan_00.json" "$files/mixed/plan_00.json"
cp "$files/plan/plans/perseus/plan_01.json" "$files/mixed/plan_01.json"
sed -i 's/"microbatches": *8/"microbatches": 4/' "$files/mixed/plan_01.json"
expect 2 'plan_01\.json: the workload block says microbatches 4, the plan.s stages have 8' -- \
  export --frontier "$files/mixed" --format artifact --out "$files/artifact"
check "a failed export changed the previous export" same_tree "$files/artifact" "$files/artifact.before"
# An input inside the folder that would be replaced is refused.
cp "$csv" "$files/solved/profile.csv"
expect 2 "--profile $files/solved/profile\.csv lies inside --out $files/solved, which is replaced whole" -- \
  solve --profile "$files/solved/profile.csv" --stages 2 --microbatches 4 --out "$files/solved"
# A folder kareus did not write is never replaced whole.
mkdir -p "$files/home" && echo notes >"$files/home/notes.txt"
expect 2 "--out $files/home: exists and is not a kareus output folder" -- \
  solve --profile "$csv" --stages 2 --microbatches 4 --out "$files/home"

# --out at a mount point is refused before any work (the commit's rename would fail with EBUSY
# after all of it); a private mount namespace gives a mount point without privileges.
if unshare -rm true 2>/dev/null; then
  mkdir -p "$files/mounted"
  check "--out at a mount point is refused up front" unshare -rm bash -c "
    mount -t tmpfs none '$files/mounted' || exit 0
    output=\$('$KAREUS' solve --profile '$csv' --stages 2 --microbatches 4 --out '$files/mounted' 2>&1)
    status=\$?
    echo \"\$output\"
    [[ \$status -eq 2 ]] && grep -q -- '--out $files/mounted: is a mount point' <<<\"\$output\""
else
  echo "note: no private mount namespace here; the --out mount point case is skipped"
fi

# Out of memory (ulimit -v) in the middle of a parse is exit 1 with a message, not a core: a
# 65 MB plan (under the 64 MiB document bound) needs about 1.3 GB parsed. Skipped where the binary
# cannot even start under the limit (a sanitizer build reserves terabytes of address space).
if (ulimit -v 1000000 && "$KAREUS" --version >/dev/null 2>&1); then
  python3 - "$files/huge_plan.json" <<'PY'
import json, sys
partitions = {f"k{i}": {"slot": "none", "ctas": 4} for i in range(40)}
instructions = [{"type": kind, "microbatch": mb, "freq_mhz": 1410, "overlap": "none", "partitions": partitions}
                for mb in range(21500) for kind in ("forward", "backward")]
json.dump({"schema": "kareus.plan/1", "workload": {}, "predicted": {"time_s": 1, "energy_j": 1},
           "stages": [{"stage": 0, "instructions": instructions}]}, open(sys.argv[1], "w"))
PY
  check "out of memory in a parse is exit 1 with a message" bash -c "
    output=\$(ulimit -v 1000000; '$KAREUS' simulate --plan '$files/huge_plan.json' --pp 1 --microbatches 1 2>&1)
    status=\$?
    echo \"exit \$status: \$output\"
    [[ \$status -eq 1 ]] && grep -q 'error: out of memory' <<<\"\$output\""
  rm -f "$files/huge_plan.json"
else
  echo "note: the binary does not start under ulimit -v; the out-of-memory case is skipped"
fi

# solve, import and export lock --out as plan does (two solves into one folder used to both
# exit 0 with their plans mixed).
echo 4545 >"$files/solved.lock"
rm -f "$files/locked"
(flock 9 && touch "$files/locked" && sleep 30) 9>>"$files/solved.lock" &
holder=$!
for _ in $(seq 200); do [[ -e $files/locked ]] && break; sleep 0.05; done
expect 2 "--out $files/solved: in use by another kareus process \(pid 4545, lock $files/solved\.lock\)" -- \
  solve --profile "$csv" --stages 2 --microbatches 4 --out "$files/solved"
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null

# Interrupted: SIGTERM in the middle of a plan leaves the previous output as it was; the next
# run removes the killed run's temporary folder.
cp -r "$files/plan" "$files/plan.before"
"$KAREUS" plan --methods megatron,perseus,kareus --max-plans 3 --seed 9 --out "$files/plan" >/dev/null 2>&1 &
victim=$!
# Killed once its temporary folder exists (the search, a few seconds, has just begun).
for _ in $(seq 400); do [[ -n $(find "$files" -maxdepth 1 -name 'plan.*.tmp' -print -quit) ]] && break; sleep 0.02; done
kill -TERM "$victim" 2>/dev/null
wait "$victim"
check "the plan was not killed mid-run" test $? -eq 143
check "SIGTERM changed the previous plan output" same_tree "$files/plan" "$files/plan.before"
expect 2 '--methods nanobatch_perseus needs --nanobatches 2' -- plan --nanobatches 1 --out "$files/plan"
check "a killed run's temporary folder was left behind" \
  test -z "$(find "$files" -maxdepth 1 -name 'plan.*.tmp' -print -quit)"

# A plan the runtime would stop on (a nanobatched instruction without one of its comm configs)
# is refused by simulate too, which used to fill in a default config.
python3 - "$files/plan/plans/perseus/plan_00.json" "$files/no_comm.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
first = plan["stages"][0]["instructions"][0]
first["overlap"] = "nanobatch"
first["partitions"] = {"fwd_attn": {"slot": "norm_0", "ctas": 20}}
json.dump(plan, open(sys.argv[2], "w"))
PY
expect 2 'no_comm\.json: stage 0 instruction 0 \(forward microbatch 0\): nanobatched, but no comm config for partition fwd_mlp' -- \
  simulate --plan "$files/no_comm.json"

# A measurement log with a torn last line (a crash or a full disk): the next run reports it,
# cuts it and appends whole lines (its first record used to be glued to the fragment).
"$KAREUS" profile --partition fwd_mlp --budget 2 --out "$files/m.jsonl" 2>/dev/null
truncate -s -30 "$files/m.jsonl"
expect 0 "m\.jsonl:2: a torn last line .* cut off" -- profile --partition fwd_attn --budget 2 --out "$files/m.jsonl"
check "the resumed measurement log holds whole lines only" \
  python3 -c 'import json, sys; [json.loads(line) for line in open(sys.argv[1])]' "$files/m.jsonl"
rm -rf "$files"
