#!/usr/bin/env bash
# The README's run command: installs what is missing, builds, and runs
# activatord on the embedded default (a directory claim store) with one host,
# `demo`, a small HTTP server that sends READY=1. It stages the demo build,
# wakes the host, shows it answering, parks it, and wakes it again with a
# plain connection. The daemon keeps running afterwards;
# `./scripts/demo.sh stop` stops it (every generation retired with proof).
set -euo pipefail
cd "$(dirname "$0")/.."

demo_dir=${DEMO_DIR:-/tmp/activator-demo}
port=${DEMO_PORT:-8080}
metrics_port=${DEMO_METRICS_PORT:-9464}
build=build/demo

stop_demo() {
  if [[ -f $demo_dir/activatord.pid ]]; then
    local pid
    pid=$(cat "$demo_dir/activatord.pid")
    if kill -0 "$pid" 2>/dev/null; then
      echo "stopping activatord (pid $pid): every generation is retired with proof"
      kill -TERM "$pid"
      while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    fi
    rm -f "$demo_dir/activatord.pid"
  fi
  # The daemon leaves its (empty) cgroup root, and on a hybrid host that
  # root's mirrors in the v1 memory/pids/cpu hierarchies; they are the
  # demo's to remove.
  if [[ -f $demo_dir/cgroup-root ]]; then
    local root v2 relative dir
    root=$(cat "$demo_dir/cgroup-root")
    v2=$(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo)
    relative=${root#"$v2"}
    for dir in "$root" $(awk -v rel="$relative" '$9 == "cgroup" && $NF ~ /(memory|pids|cpu)/ \
        { print $5 rel }' /proc/self/mountinfo); do
      [[ -d $dir ]] && find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null || true
    done
  fi
}

if [[ ${1:-} == stop ]]; then
  stop_demo
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "demo: run as root (it creates cgroups): sudo $0" >&2
  exit 1
fi

./scripts/install-deps.sh
if [[ -f $build/build.ninja ]]; then
  meson setup --reconfigure "$build" -Dtests=false -Dbenchmarks=false >/dev/null
else
  meson setup "$build" -Dtests=false -Dbenchmarks=false >/dev/null
fi
ninja -C "$build" activator/daemon/activatord activator/ctl/activatorctl tests/apps/act-testapp >/dev/null

stop_demo
rm -rf "$demo_dir"
mkdir -p "$demo_dir/hosts"

# The cgroup2 mount is read from mountinfo: /sys/fs/cgroup on a pure v2 box,
# /sys/fs/cgroup/unified on a hybrid one.
cgroup2=$(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo)
if [[ -z $cgroup2 ]]; then
  echo "demo: no cgroup2 hierarchy is mounted; activatord needs one" >&2
  exit 1
fi
echo "$cgroup2/activator-demo" >"$demo_dir/cgroup-root"

cat >"$demo_dir/activatord.conf" <<CONF
[Activator]
Box=demo-box
Store=dir://$demo_dir/state/claims
StateDirectory=$demo_dir/state
RuntimeDirectory=$demo_dir/run
HostsDirectory=$demo_dir/hosts
CgroupRoot=$cgroup2/activator-demo
MetricsListen=127.0.0.1:$metrics_port
CONF
cat >"$demo_dir/hosts/demo.conf" <<CONF
[Host]
Exec=act-testapp
Environment=ACT_TESTAPP_VERSION=v1
Ready=notify
ReadyTimeoutSec=10
StopTimeoutSec=5
IdleTimeoutSec=0
[Listen]
ListenStream=127.0.0.1:$port
[Limits]
MemoryMax=256M
PidsMax=64
CONF

ctl() { "$build/activator/ctl/activatorctl" --connect "ipc://$demo_dir/run/control.ipc" "$@"; }

"$build/activator/daemon/activatord" --check-config --config "$demo_dir/activatord.conf"
"$build/activator/daemon/activatord" --config "$demo_dir/activatord.conf" \
  >"$demo_dir/activatord.log" 2>&1 &
echo $! >"$demo_dir/activatord.pid"
for _ in $(seq 100); do
  ctl version >/dev/null 2>&1 && break
  sleep 0.1
done
ctl version

echo
echo "== stage the demo build as version v1 and make it live"
ctl stage demo v1 "$PWD/$build/tests/apps/act-testapp" --promote
echo
echo "== wake demo"
ctl wake demo
echo
echo "== it answers on 127.0.0.1:$port"
curl -sS "http://127.0.0.1:$port/"
echo
echo "== what serves it"
ctl status demo
ctl --json status demo | grep -o '"cgroup": *"[^"]*"' || true
echo
echo "== the claim names this box and the generation"
ctl claim show demo
echo
echo "== park it, then a plain connection wakes a new generation"
ctl park demo >/dev/null
sleep 1
ctl status demo
curl -sS "http://127.0.0.1:$port/"
ctl status demo
echo
echo "== metrics (Prometheus text at http://127.0.0.1:$metrics_port/metrics)"
curl -sS "http://127.0.0.1:$metrics_port/metrics" | grep -E '^activator_(wakes_total|generations_(started|retired)_total|hosts)' || true
echo
cat <<EOT
activatord is running (pid $(cat "$demo_dir/activatord.pid")), log: $demo_dir/activatord.log
  try:   $build/activator/ctl/activatorctl --connect ipc://$demo_dir/run/control.ipc watch
  stop:  ./scripts/demo.sh stop
EOT
