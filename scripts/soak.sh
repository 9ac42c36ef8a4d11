#!/usr/bin/env bash
# The chaos soak (tests/soak), for as long as you like:
#   ./scripts/soak.sh [--minutes N] [--seed S] [act-soak's other flags]
# --minutes defaults to 30; a night is --minutes 480. A seed replays the
# faults of an earlier run (it prints its seed first thing). Builds the
# test build (gcc + ASan/UBSan, as ./scripts/test.sh) when it is missing or
# stale, then runs act-soak with the environment the test suite gives it.
# Run as root: it runs real daemons, cgroups and an etcd.
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=30
args=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --seed) args+=(--seed "$2"); shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
if ! [[ $minutes =~ ^[0-9]+$ ]] || [[ $minutes -lt 1 ]]; then
  echo "soak.sh: --minutes needs a whole number of minutes, 1 or more" >&2
  exit 2
fi

./scripts/install-deps.sh
if [[ ! -f build/test/build.ninja ]]; then
  CC=gcc meson setup build/test -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false \
    -Dtest_hooks=true >/dev/null
fi
ninja -C build/test >/dev/null

# What tests/meson.build gives every test.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp
exec build/test/tests/soak/act-soak --duration "${minutes}m" "${args[@]}"
