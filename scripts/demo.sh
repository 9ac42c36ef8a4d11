#!/usr/bin/env bash
# The README's run command. Until activatord lands (issue 5) it builds the
# project and runs what exists: the process layer's spawn benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
if [[ -f build/demo/build.ninja ]]; then
  meson setup --reconfigure build/demo -Dtests=false >/dev/null
else
  meson setup build/demo -Dtests=false >/dev/null
fi
ninja -C build/demo
echo "activator built in build/demo; the daemon demo arrives with activatord."
