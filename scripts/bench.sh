#!/usr/bin/env bash
# Builds optimized and runs every benchmark under bench/. Each prints medians
# and a ratio against a baseline measured in the same run. A benchmark that
# fails does not stop the others; the failures are listed at the end and the
# script then exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
if [[ -f build/bench/build.ninja ]]; then
  meson setup --reconfigure build/bench --buildtype=release -Dtests=false >/dev/null
else
  meson setup build/bench --buildtype=release -Dtests=false >/dev/null
fi
ninja -C build/bench

failed=()
# The glob also matches the bench-*.p directories of the objects, which are
# searchable (x) too; only executable regular files are benchmarks.
for bench in build/bench/bench/*/bench-*; do
  [[ -f $bench && -x $bench ]] || continue
  name=$(basename "$bench")
  echo "== $name"
  status=0
  "$bench" "$@" || status=$?
  if ((status != 0)); then
    echo "== $name failed with exit status $status" >&2
    failed+=("$name")
  fi
done

if ((${#failed[@]})); then
  echo "benchmarks that failed: ${failed[*]}" >&2
  exit 1
fi
