#!/usr/bin/env bash
# Every C++/CUDA source passes clang-format (.clang-format). Skipped without clang-format.
set -u
cd "$(dirname "$0")/.."
formatter=$(command -v clang-format || command -v clang-format-14 || true)
if [[ -z $formatter ]]; then echo "skipped: clang-format not installed"; exit 77; fi
failed=0
checked=0
while IFS= read -r file; do
  checked=$((checked + 1))
  if ! "$formatter" --dry-run --Werror "$file" >/dev/null 2>&1; then
    echo "not formatted: $file (run clang-format -i $file)"
    failed=$((failed + 1))
  fi
done < <(git ls-files '*.cpp' '*.h' '*.cu' '*.c' 2>/dev/null || find src include tools tests bench python -name '*.cpp' -o -name '*.h')
echo "format: $((checked - failed)) passed, $failed failed"
[[ $failed -eq 0 ]]
