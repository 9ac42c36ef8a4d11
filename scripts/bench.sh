#!/usr/bin/env bash
# Builds optimized and runs every benchmark under bench/. Each prints medians
# and a ratio against a baseline measured in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
if [[ -f build/bench/build.ninja ]]; then
  meson setup --reconfigure build/bench --buildtype=release -Dtests=false >/dev/null
else
  meson setup build/bench --buildtype=release -Dtests=false >/dev/null
fi
ninja -C build/bench
for bench in build/bench/bench/*/bench-*; do
  [[ -x $bench ]] || continue
  echo "== $(basename "$bench")"
  "$bench" "$@"
done
