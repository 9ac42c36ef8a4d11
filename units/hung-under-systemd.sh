#!/bin/sh
# hung-under-systemd.sh SERVICE TMPFILES ACTIVATORD ACTIVATORCTL TESTAPP
#
# A hung daemon under the real service manager. Boots Debian 12 with systemd
# as PID 1 in systemd-nspawn (as boot-under-systemd.sh does) with an etcd of
# its own and two boxes on it: box-1 is activatord.service as shipped, box-2
# a second daemon beside it (a transient unit with its own configuration,
# directories and cgroup). One host, demo, has Failover=yes on both: box-2
# may take it once box-1's lease is gone. box-1 serves it; then box-1's
# daemon is stopped (SIGSTOP: it answers nothing, renews nothing and cannot
# fence, while the app serves on). The checks:
#   - systemd's watchdog replaces the stopped daemon (WatchdogSec=, then
#     TimeoutAbortSec='s SIGKILL, then Restart=), and says so in the journal;
#   - all along, sampled every 20 ms, no instant sees demo's generation
#     populated and unfrozen on both boxes (a frozen one answers nobody);
#   - demo then answers on the box its claim names;
#   - the sampling goes on until the stopped daemon's lease is gone from
#     etcd, then through FailoverGraceSec= and one of box-2's polls, the
#     time in which box-2 could take demo.
# With a watchdog too slow for the lease (WatchdogSec=12s) the stopped
# daemon outlives its lease, box-2 takes demo over, and the two serve it at
# once: this test fails then. The restart's time from the stop is printed,
# against the 8.7 s after which box-2 could take demo
# (docs/claim-protocol.md, "Self-fencing").
set -eu
service=$1 tmpfiles=$2 activatord=$3 activatorctl=$4 testapp=$5

if [ "$(id -u)" -ne 0 ]; then
    echo "skip: booting a container needs root"
    exit 77
fi
etcd=$(command -v etcd || true)
if [ -z "$etcd" ]; then
    echo "skip: no etcd (scripts/install-deps.sh installs etcd-server)"
    exit 77
fi
if ! command -v systemd-nspawn >/dev/null 2>&1; then
    echo "FAIL: systemd-nspawn is missing (scripts/install-deps.sh installs systemd-container)"
    exit 1
fi

. "$(dirname "$0")/nspawn-lib.sh"
root=$("$(dirname "$0")/container-root.sh") || exit 1

nspawn_make_work act-hung

mkdir -p "$work/results" "$work/etc/hosts" "$work/etc2/hosts" "$work/dropin"
cat >"$work/etc/activatord.conf" <<'EOF'
[Activator]
Box=box-1
Store=etcd://127.0.0.1:2379/fleet
EOF
cat >"$work/etc2/activatord.conf" <<'EOF'
[Activator]
Box=box-2
Store=etcd://127.0.0.1:2379/fleet
StateDirectory=/var/lib/activator-box2
RuntimeDirectory=/run/activator-box2
HostsDirectory=/etc/activator-box2/hosts
UserDatabaseDirectory=/run/activator-box2/userdb
MetricsListen=no
EOF
for box in 1 2; do
    dir=$work/etc
    [ "$box" = 1 ] || dir=$work/etc2
    cat >"$dir/hosts/demo.conf" <<EOF
[Host]
Exec=act-testapp
Ready=notify
ReadyTimeoutSec=10
StopTimeoutSec=5
IdleTimeoutSec=0
Failover=yes
[Listen]
ListenStream=127.0.0.$box:18080
EOF
done
# The test build is sanitized; its leak report at exit is checked elsewhere.
cat >"$work/dropin/sanitizers.conf" <<'EOF'
[Service]
Environment=ASAN_OPTIONS=detect_leaks=0
EOF
# No Wants= on activatord.service: box-1 starts once etcd answers.
cat >"$work/act-check.service" <<'EOF'
[Unit]
Description=activatord hung under systemd
[Service]
Type=oneshot
ExecStart=/usr/local/bin/act-check
EOF
cat >"$work/act-check" <<'EOF'
#!/bin/sh
# Inside the container, as root. One line per check in /results/checks.txt.
out=/results/checks.txt
ok() { echo "ok $1" >>"$out"; }
fail() { echo "FAIL $1: $2" >>"$out"; }
finish() {
    journalctl -u activatord -u act-box2 -u act-etcd --no-pager >/results/journal.txt 2>&1
    echo done >>"$out"
    systemctl poweroff
    exit 0
}
ctl() { ASAN_OPTIONS=detect_leaks=0 activatorctl --no-color "$@" >>/results/activatorctl.txt 2>&1; }
ctl2() { ctl --connect ipc:///run/activator-box2/control.ipc "$@"; }
ms() { echo $(($(date +%s%N) / 1000000)); }
cg=$(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo)

systemd-run --quiet --unit=act-etcd /usr/local/bin/etcd --name act --data-dir /var/lib/act-etcd \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster act=http://127.0.0.1:2380
for _ in $(seq 300); do
    curl -s --max-time 1 http://127.0.0.1:2379/health | grep -q '"health":"true"' && break
    sleep 0.1
done
curl -s --max-time 1 http://127.0.0.1:2379/health | grep -q '"health":"true"' && ok etcd ||
    { fail etcd "etcd does not answer"; finish; }

systemctl start activatord && ok box-1 || { fail box-1 "activatord did not start"; finish; }
systemd-run --quiet --unit=act-box2 -p Type=notify -p NotifyAccess=main -p Delegate=yes \
    -p KillMode=process -p Environment=ASAN_OPTIONS=detect_leaks=0 \
    /usr/local/sbin/activatord --config /etc/activator-box2/activatord.conf &&
    ok box-2 || { fail box-2 "the second daemon did not start"; finish; }

ctl stage demo v1 /opt/act-testapp --promote && ctl2 stage demo v1 /opt/act-testapp --promote &&
    ctl claim assign demo box-1 && ok staged-and-assigned ||
    { fail staged-and-assigned "see activatorctl.txt"; finish; }
answer=$(curl -s --max-time 10 http://127.0.0.1:18080/)
case $answer in *"version=v1"*) ok serves-on-box-1 ;; *) fail serves-on-box-1 "got: $answer"; finish ;; esac

# The sampler: a generation of demo populated and not frozen on both boxes
# at once, the first read again after the second so that only one seen
# serving before and after the other counts.
serving() {
    for leaf in "$1"/g-*; do
        [ -d "$leaf" ] || continue
        read -r pid <"$leaf/cgroup.procs" 2>/dev/null || continue
        [ -n "$pid" ] || continue
        while read -r key value; do
            [ "$key" = frozen ] && [ "$value" = 0 ] && return 0
        done <"$leaf/cgroup.events"
    done
    return 1
}
t0=$(ms)
box1=$cg/system.slice/activatord.service/hosts/demo
box2=$cg/system.slice/act-box2.service/hosts/demo
rm -f /tmp/sampler-stop /tmp/overlaps
(
    samples=0
    while [ ! -e /tmp/sampler-stop ]; do
        if serving "$box1" && serving "$box2" && serving "$box1"; then
            echo "+$(($(ms) - t0)) ms: demo unfrozen on both boxes" >>/tmp/overlaps
        fi
        samples=$((samples + 1))
        sleep 0.02
    done
    echo "$samples" >/tmp/samples
) &
sampler=$!

leases() {
    curl -s --max-time 2 -X POST http://127.0.0.1:2379/v3/lease/leases -d '{}' |
        grep -o '"ID":"[0-9]*"' | sort
}
leases_before=$(leases)
main=$(systemctl show -p MainPID --value activatord)
stopped=$(ms)
kill -STOP "$main"
now=$main
for _ in $(seq 300); do
    now=$(systemctl show -p MainPID --value activatord)
    [ "$now" != "$main" ] && [ "$now" != 0 ] &&
        [ "$(systemctl is-active activatord)" = active ] && break
    sleep 0.1
done
restarted=$(ms)
echo "box-1's daemon stopped at +$((stopped - t0)) ms; the next one said READY=1" \
    "$((restarted - stopped)) ms later (box-2 may take its failover hosts from 8700 ms on)" \
    >/results/timing.txt
[ "$now" != "$main" ] && [ "$now" != 0 ] && ok replaced-by-watchdog ||
    fail replaced-by-watchdog "MainPID $main -> $now after $((restarted - stopped)) ms"
journalctl -u activatord --no-pager | grep -q -i watchdog && ok watchdog-said ||
    fail watchdog-said "the journal does not name the watchdog"

# demo answers again on the box its claim names (box-1's next daemon
# resumes it, or box-2 took it), within the wake's bound.
served=
for _ in $(seq 300); do
    for box in 1 2; do
        case $(curl -s --max-time 1 "http://127.0.0.$box:18080/") in
        *"version=v1"*) served=$box ;;
        esac
    done
    [ -n "$served" ] && break
    sleep 0.1
done
[ -n "$served" ] && ok serves-after || fail serves-after "neither box answers for demo"
: >/results/claim.txt
ASAN_OPTIONS=detect_leaks=0 activatorctl --no-color claim show demo >/results/claim.txt 2>&1
grep -q "box-$served" /results/claim.txt && ok claim-names-server ||
    fail claim-names-server "box-$served answers; the claim: $(tr '\n' ' ' </results/claim.txt)"

# The sampler runs on past the stopped daemon's lease (until etcd dropped
# it: of the leases before the stop only box-2's is left), then through
# FailoverGraceSec= and a poll of box-2's (2 s and 2.5 s with the defaults,
# protocol time): box-2 could take demo only within that.
for _ in $(seq 300); do
    left=$(leases | grep -c -F -x -f /dev/stdin <<LEASES || true
$leases_before
LEASES
)
    [ "$left" -le 1 ] && break
    sleep 0.1
done
[ "$left" -le 1 ] && ok old-lease-expired || fail old-lease-expired "$left leases of before remain"
sleep 5
touch /tmp/sampler-stop
wait "$sampler"
samples=$(cat /tmp/samples 2>/dev/null || echo 0)
if [ -s /tmp/overlaps ]; then
    fail never-on-both "$(head -3 /tmp/overlaps | tr '\n' ' ')"
elif [ "$samples" -gt 0 ]; then
    ok never-on-both
else
    fail never-on-both "the sampler took no sample"
fi
echo "$samples samples; demo served by box-$served after" >>/results/timing.txt
finish
EOF
chmod +x "$work/act-check"

nspawn_boot_activator 240 "$root" "$work" \
    --bind-ro="$etcd:/usr/local/bin/etcd" \
    --bind="$work/etc2:/etc/activator-box2"
nspawn_report "$work/results/checks.txt"
cat "$work/results/timing.txt" 2>/dev/null || true
grep -q '^FAIL' "$work/results/checks.txt" 2>/dev/null && nspawn_status=1
nspawn_finish 60 activatorctl.txt journal.txt console.txt
exit $nspawn_status
