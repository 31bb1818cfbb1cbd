#!/usr/bin/env bash
# The HTML report of `kareus plan` loads in headless Chromium without errors.
# Exit 77 (skipped) when Chromium is not installed.
set -u
KAREUS=${KAREUS:?set KAREUS to the kareus binary}
browser=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $browser ]]; then
  echo "skipped: chromium not installed (apt-get install chromium)"
  exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$KAREUS" plan --layers-per-stage 15,13 --tp-ctas 6:30:6 --max-plans 4 --out "$out/plan" >/dev/null 2>"$out/plan.log" || {
  echo "FAIL: kareus plan failed"; cat "$out/plan.log"; exit 1; }
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --enable-logging=stderr --v=0 \
  --dump-dom "file://$out/plan/report.html" >"$out/dom.html" 2>"$out/browser.log"
status=$?
if [[ $status -ne 0 ]]; then echo "FAIL: chromium exited $status"; cat "$out/browser.log"; exit 1; fi
# Console errors (script errors, failed loads) are logged as CONSOLE lines.
if grep -E "CONSOLE|Uncaught|Failed to load" "$out/browser.log"; then echo "FAIL: the page logged errors"; exit 1; fi
for needle in "<h2>Frontiers</h2>" "Pipeline timeline" "Partition fronts" "kareus</text>" " MHz</text>" "</svg>"; do
  if ! grep -qF "$needle" "$out/dom.html"; then echo "FAIL: rendered page lacks $needle"; exit 1; fi
done
svgs=$(grep -o "<svg" "$out/dom.html" | wc -l)
if [[ $svgs -lt 3 ]]; then echo "FAIL: expected >= 3 charts, found $svgs"; exit 1; fi
echo "report: 1 passed, 0 failed"
