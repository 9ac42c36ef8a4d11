#!/usr/bin/env bash
# The README's test command: installs what is missing, builds with -Werror
# under gcc (with AddressSanitizer + UndefinedBehaviorSanitizer) and clang,
# and runs every test. Run as root: the cgroup, process and daemon tests use
# real cgroups and skip (saying why) without root.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh

setup() { # build-dir, then meson options
  local dir=$1
  shift
  if [[ -f $dir/build.ninja ]]; then
    meson setup --reconfigure "$dir" "$@" >/dev/null
  else
    meson setup "$dir" "$@" >/dev/null
  fi
}

# clang: warnings are errors; built, not run (the sanitizer build runs),
# except the libFuzzer targets, which run for a bounded time.
CC=clang setup build/clang -Dwerror=true -Dbenchmarks=true -Dfuzz=true
ninja -C build/clang
meson test -C build/clang --print-errorlogs --suite fuzz

# gcc at -O3 (what scripts/bench.sh builds) sees other warnings than at -O2.
CC=gcc setup build/release --buildtype=release -Dwerror=true -Dtests=false -Dbenchmarks=true
ninja -C build/release

CC=gcc setup build/test -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false -Dtest_hooks=true
ninja -C build/test
# The Debian root the units-boot test boots, made now (once per machine) so
# that its download does not run beside the timing-sensitive tests.
if [[ $(id -u) -eq 0 ]]; then
  units/container-root.sh >/dev/null
fi
# The Debian package, built now (its build directory, build/deb, is kept) so
# that the units-deb test, which builds it again, finds nothing to compile.
./scripts/package.sh >/dev/null || echo "test: scripts/package.sh failed; the units-deb test says why" >&2
status=0
meson test -C build/test --print-errorlogs --num-processes 2 "$@" || status=$?

# One plain closing line for whoever reads the log, from meson's own summary.
summary=build/test/meson-logs/testlog.txt
count() { awk -v key="$1" '$1 == key { n = $2 } END { print n + 0 }' "$summary"; }
echo "tests: $(count Ok:) passed, $(( $(count Fail:) + $(count Timeout:) )) failed, $(count Skipped:) skipped"
exit "$status"
