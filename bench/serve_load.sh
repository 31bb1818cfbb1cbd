#!/usr/bin/env bash
# Load test of `kareus serve` (bench/RESULTS.md): serves the kareus frontier of a default
# `kareus plan` on a free loopback port and runs build/bench/serve_load_bench against it
# (64 clients x 100 GET /schedule by default), then stops the server with SIGTERM.
#   bash bench/serve_load.sh [clients] [requests]
set -euo pipefail
cd "$(dirname "$0")/.."
source tests/interop/serve_helpers.sh
build=${KAREUS_BUILD_DIR:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/tools/kareus" plan --out "$tmp/out" --methods kareus >/dev/null 2>&1
"$build/tools/kareus" serve --frontier "$tmp/out" --port 0 >"$tmp/serve.log" 2>&1 &
server=$!
port=$(serve_port "$tmp/serve.log") || { cat "$tmp/serve.log"; kill "$server"; exit 1; }
status=0
"$build/bench/serve_load_bench" "http://127.0.0.1:$port" "${1:-64}" "${2:-100}" || status=$?
kill -TERM "$server"
wait "$server"
exit "$status"
