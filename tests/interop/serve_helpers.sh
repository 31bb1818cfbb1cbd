# Sourced by tests/interop/interop_cli_test.sh and bench/serve_load.sh.

# serve_port LOG: waits up to 10 s for `kareus serve --port 0`, writing to LOG, to say
# "listening on http://127.0.0.1:PORT" and prints PORT; returns 1 (printing nothing) if it does not.
serve_port() {
  local log=$1 port=
  for _ in $(seq 100); do
    port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$log")
    if [[ -n $port ]]; then
      echo "$port"
      return 0
    fi
    sleep 0.1
  done
  return 1
}
