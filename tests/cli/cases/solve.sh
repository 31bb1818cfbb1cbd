# kareus solve: Perseus CSV -> frontier.json (sourced by run_cli_tests.sh).
solve_data=$(dirname "${BASH_SOURCE[0]}")/../../data/plan/perseus_csv
solve_out=$(mktemp -d)
expect 0 'frontier points' -- solve --profile "$solve_data/valid.csv" --stages 2 --microbatches 4 --static-power 30 --out "$solve_out/a"
expect 0 'fastest: +0\.162000 s' -- solve --profile "$solve_data/valid.csv" --stages 2 --microbatches 4 --out "$solve_out/b"
expect 0 'within 0\.[0-9]+% of the lower bound' -- solve --profile "$solve_data/valid.csv" --stages 2 --microbatches 4 --static-power 30 --bound --out "$solve_out/d"
if [[ ! -f $solve_out/a/frontier.json || ! -f $solve_out/a/plans/plan_0000.json ]]; then
  echo "FAIL: kareus solve did not write frontier.json and plans/plan_0000.json"
  failed=$((failed + 1))
fi
expect 2 'short_line\.csv:3: expected 5 fields' -- solve --profile "$solve_data/short_line.csv" --stages 1 --microbatches 2 --out "$solve_out/c"
expect 2 'stage_out_of_range\.csv:6: stage 2 is out of range for --stages 2' -- solve --profile "$solve_data/stage_out_of_range.csv" --stages 2 --microbatches 2 --out "$solve_out/c"
expect 2 'missing_stage\.csv: no rows for stage 1' -- solve --profile "$solve_data/missing_stage.csv" --stages 2 --microbatches 2 --out "$solve_out/c"
expect 2 'cannot read .*no_such\.csv' -- solve --profile "$solve_data/no_such.csv" --stages 1 --microbatches 2 --out "$solve_out/c"
expect 2 '^kareus solve: error: --out /proc/kareus' -- solve --profile "$solve_data/valid.csv" --stages 2 --microbatches 2 --out /proc/kareus
expect 2 'unit-time' -- solve --profile "$solve_data/valid.csv" --stages 2 --microbatches 2 --unit-time -1 --out "$solve_out/c"
expect 2 'unit-time 1e-09 s .* use a larger --unit-time' -- solve --profile "$solve_data/valid.csv" --stages 2 --microbatches 4 --unit-time 1e-9 --out "$solve_out/c"
expect 2 'stages' -- solve --profile "$solve_data/valid.csv" --stages 0 --microbatches 2 --out "$solve_out/c"
expect 2 'required' -- solve --profile "$solve_data/valid.csv" --stages 2 --out "$solve_out/c"
if [[ -e $solve_out/c/frontier.json ]]; then
  echo "FAIL: a failed kareus solve left $solve_out/c/frontier.json"
  failed=$((failed + 1))
fi
rm -rf "$solve_out"
