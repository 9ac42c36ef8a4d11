#!/bin/sh
# hostile-under-systemd.sh SERVICE TMPFILES ACTIVATORD ACTIVATORCTL TESTAPP HOSTILE CHECK
#
# The hostile tenant under the real service manager: boots
# Debian 12 with systemd as PID 1 in systemd-nspawn, with the shipped
# activatord.service and tmpfiles entry, and the hosts configured as an
# operator would (no User=, no limits: the defaults are what is tested):
#   - ordinary: act-testapp --log-requests on 127.0.0.1:18080;
#   - hostile:  act-hostile on 127.0.0.1:18090;
# The fork bomb drives the default PidsMax=4096 here: nspawn gives the
# container no writable pids controller, so the daemon holds a host without
# User= to it by RLIMIT_NPROC and refuses a PidsMax= set in a host file
# (isolation-hostile drives PidsMax=512 in a cgroup instead). The bomb forks
# until that cap refuses it, for up to two minutes, so a slow box gets there
# (4094 processes took 17.6 s on the test machine).
# both staged with activatorctl and woken, then act-hostile-check runs the
# scenario of tests/isolation/hostile_check.c against the daemon systemd
# runs, the ordinary host's output looked for in the journal. It passes
# when that prints "N tried, 0 succeeded" and exits 0.
# The root comes from container-root.sh (debootstrap once, then cached).
set -eu
service=$1 tmpfiles=$2 activatord=$3 activatorctl=$4 testapp=$5 hostile=$6 check=$7

if [ "$(id -u)" -ne 0 ]; then
    echo "skip: booting a container needs root"
    exit 77
fi
if ! command -v systemd-nspawn >/dev/null 2>&1; then
    echo "FAIL: systemd-nspawn is missing (scripts/install-deps.sh installs systemd-container)"
    exit 1
fi
here=$(dirname "$0")
. "$here/nspawn-lib.sh"
root=$("$here/container-root.sh") || exit 1

nspawn_make_work act-hostile-boot

mkdir -p "$work/results" "$work/etc/hosts" "$work/dropin"
cat >"$work/etc/activatord.conf" <<'EOT'
[Activator]
Box=box-1
EOT
cat >"$work/etc/hosts/ordinary.conf" <<'EOT'
[Host]
Exec=act-testapp --log-requests
Ready=notify
ReadyTimeoutSec=10
StopTimeoutSec=5
IdleTimeoutSec=0
[Listen]
ListenStream=127.0.0.1:18080
EOT
cat >"$work/etc/hosts/hostile.conf" <<'EOT'
[Host]
Exec=act-hostile
# A helper the tenant can see (it runs as the host): the attack reads
# through its /proc/<pid>/root.
ExecReplicate=/bin/sleep infinity
Ready=notify
ReadyTimeoutSec=10
StopTimeoutSec=5
IdleTimeoutSec=0
[Listen]
ListenStream=127.0.0.1:18090
EOT
# The test build is sanitized; its leak report at exit is checked elsewhere.
cat >"$work/dropin/sanitizers.conf" <<'EOT'
[Service]
Environment=ASAN_OPTIONS=detect_leaks=0
EOT
cat >"$work/act-check.service" <<'EOT'
[Unit]
Description=the hostile tenant under systemd
Wants=activatord.service
After=activatord.service
[Service]
Type=oneshot
ExecStart=/usr/local/bin/act-check
EOT
cat >"$work/act-check" <<'EOT'
#!/bin/sh
# Inside the container, as root.
export ASAN_OPTIONS=detect_leaks=0
out=/results/hostile.txt
ctl() { activatorctl --no-color "$@" >>/results/activatorctl.txt 2>&1; }
{
    echo "activatord is $(systemctl is-active activatord)"
    ctl stage ordinary v1 /opt/act-testapp --promote || echo "PROBLEM staging ordinary"
    ctl stage hostile v1 /opt/act-hostile --promote || echo "PROBLEM staging hostile"
    ctl wake ordinary || echo "PROBLEM waking ordinary"
    ctl wake hostile || echo "PROBLEM waking hostile"
} >"$out" 2>&1
act-hostile-check --state-dir /var/lib/activator --runtime-dir /run/activator \
    --hostile hostile:18090 --ordinary ordinary:18080 --pids-max 4096 >>"$out" 2>&1
echo "exit $?" >>"$out"
activatorctl --no-color status >>/results/activatorctl.txt 2>&1
systemctl status activatord --no-pager >/results/unit.txt 2>&1
journalctl --no-pager >/results/journal.txt 2>&1
echo done >>"$out"
systemctl poweroff
EOT
chmod +x "$work/act-check"

nspawn_boot_activator 300 "$root" "$work" \
    --bind-ro="$hostile:/opt/act-hostile" \
    --bind-ro="$check:/usr/local/bin/act-hostile-check"
nspawn_report "$work/results/hostile.txt"
grep -qx "exit 0" "$work/results/hostile.txt" 2>/dev/null || nspawn_status=1
grep -q "^[0-9]* tried, 0 succeeded$" "$work/results/hostile.txt" 2>/dev/null || nspawn_status=1
nspawn_finish 40 activatorctl.txt unit.txt console.txt
if [ "$nspawn_status" -ne 0 ]; then
    echo "---- journal.txt (activatord) ----"
    grep -v "status: flood" "$work/results/journal.txt" 2>/dev/null | grep activatord | tail -60
fi
exit $nspawn_status
