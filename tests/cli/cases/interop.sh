# kareus export / import / serve: flag and input errors (the round trip and the server run in
# tests/interop/interop_cli_test.sh).
interop_tmp=$(mktemp -d)
expect 2 '--format is required' -- export --plan x.json --out "$interop_tmp/a"
expect 2 "--format must be 'artifact', found 'zeus'" -- export --plan x.json --format zeus --out "$interop_tmp/a"
expect 2 'give either --plan FILE or --frontier DIR' -- export --format artifact --out "$interop_tmp/a"
expect 2 'no plan_N.json files in the folder' -- export --frontier "$interop_tmp" --format artifact --out "$interop_tmp/a"
expect 2 'no freqs_pipeline_NNNNN.py files in the folder' -- import --format artifact "$interop_tmp" --out "$interop_tmp/b"
printf "[\n[('forward', 1410)],\n]\n" >"$interop_tmp/freqs_pipeline_00003.py"
expect 2 'freqs_pipeline_00003.py:1: expected 2 stage lists \(--pp 2\), found 1' -- \
  import --format artifact "$interop_tmp" --out "$interop_tmp/b"
printf "[\n[('forward', 1410)],\n[('forward', 1410)],\n]\n" >"$interop_tmp/freqs_pipeline_00003.py"
expect 2 'freqs_pipeline_00003.py:2: stage 0: expected 16 entries' -- \
  import --format artifact "$interop_tmp" --out "$interop_tmp/b"
printf "[\n]\n" >"$interop_tmp/scheds_pipeline_00004.py"
expect 2 'scheds_pipeline_00004.py: no freqs_pipeline_00004.py beside it' -- \
  import --format artifact "$interop_tmp" --out "$interop_tmp/b"
expect 2 '--frontier .*missing: no such file or folder' -- serve --frontier "$interop_tmp/missing"
expect 2 '--port: Value 70000 not in range' -- serve --frontier "$interop_tmp" --port 70000
expect 2 '--frontier is required' -- serve
rm -rf "$interop_tmp"
