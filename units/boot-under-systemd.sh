#!/bin/sh
# boot-under-systemd.sh SERVICE TMPFILES ACTIVATORD ACTIVATORCTL TESTAPP
#
# The unit under a real service manager: boots Debian 12 with systemd as PID 1
# in systemd-nspawn (its own network namespace, a throwaway overlay over a
# cached root), installs activatord.service, the tmpfiles entry and the
# binaries into it, and checks there, as an operator would:
#   - systemd starts activatord (Type=notify: it said READY=1) and shows its
#     STATUS=;
#   - a staged build wakes and answers, as a dynamic user of its own with no
#     capabilities, its state directory reachable through the tmpfiles
#     entry's directories;
#   - the daemon crashes (SIGKILL): systemd restarts it (Restart=always), the
#     generation keeps running (KillMode=process), and the next daemon takes
#     the socket back from systemd's FD store and resumes the generation,
#     which answers on it;
#   - systemctl restart is a handover (RestartKillSignal=SIGUSR2): the
#     daemon exits 0 leaving the generation running, and the next daemon
#     resumes it, which answers on;
#   - systemctl stop retires it: the app and its cgroup are gone.
# The root comes from container-root.sh (debootstrap once, then cached).
set -eu
service=$1 tmpfiles=$2 activatord=$3 activatorctl=$4 testapp=$5

if [ "$(id -u)" -ne 0 ]; then
    echo "skip: booting a container needs root"
    exit 77
fi
for tool in systemd-nspawn; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "FAIL: $tool is missing (scripts/install-deps.sh installs systemd-container)"
        exit 1
    fi
done

. "$(dirname "$0")/nspawn-lib.sh"
root=$("$(dirname "$0")/container-root.sh") || exit 1

nspawn_make_work act-boot

mkdir -p "$work/results" "$work/etc/hosts" "$work/dropin"
cat >"$work/etc/activatord.conf" <<'EOF'
[Activator]
Box=box-1
EOF
cat >"$work/etc/hosts/demo.conf" <<'EOF'
[Host]
Exec=act-testapp
Ready=notify
ReadyTimeoutSec=10
StopTimeoutSec=5
IdleTimeoutSec=0
[Listen]
ListenStream=127.0.0.1:18080
EOF
# The test build is sanitized; its leak report at exit is checked elsewhere.
cat >"$work/dropin/sanitizers.conf" <<'EOF'
[Service]
Environment=ASAN_OPTIONS=detect_leaks=0
EOF
cat >"$work/act-check.service" <<'EOF'
[Unit]
Description=activatord checks under systemd
Wants=activatord.service
After=activatord.service
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
ctl() { ASAN_OPTIONS=detect_leaks=0 activatorctl --no-color "$@" >>/results/activatorctl.txt 2>&1; }
get() { curl -s --max-time 5 http://127.0.0.1:18080/; }
pid_of() { printf '%s' "$1" | sed -n 's/.*pid=\([0-9]*\).*/\1/p'; }
cg=$(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo)

state=$(systemctl is-active activatord)
[ "$state" = active ] && ok started || fail started "activatord is $state"
text=$(systemctl show -p StatusText --value activatord)
case $text in *hosts*) ok status-text ;; *) fail status-text "StatusText=$text" ;; esac

ctl stage demo v1 /opt/act-testapp --promote && ok stage || fail stage "see activatorctl.txt"
ctl wake demo && ok wake || fail wake "see activatorctl.txt"
answer=$(get)
case $answer in *"version=v1"*) ok answers ;; *) fail answers "got: $answer" ;; esac
pid=$(pid_of "$answer")
# Without User=, a dynamic user of its own, with no capabilities, and its
# state directory reachable through the tmpfiles entry's directories.
uid=$(awk '$1 == "Uid:" { print $2 }' "/proc/$pid/status" 2>/dev/null)
capeff=$(awk '$1 == "CapEff:" { print $2 }' "/proc/$pid/status" 2>/dev/null)
owner=$(stat -c %u /var/lib/activator/hosts/demo/state 2>/dev/null)
[ -n "$uid" ] && [ "$uid" -ge 1879048192 ] && [ "$uid" -le 1879113727 ] && [ "$owner" = "$uid" ] &&
    [ "$capeff" = 0000000000000000 ] && ok dynamic-user ||
    fail dynamic-user "uid $uid, CapEff $capeff, state directory owned by $owner"
# The box's user database names that uid through the daemon's userdb
# service (nss-systemd asks /run/systemd/userdb/io.activator.DynamicUser).
entry=$(getent passwd "$uid" 2>/dev/null)
case $entry in "act-demo:"*) ok userdb ;; *) fail userdb "getent passwd $uid: '$entry'" ;; esac

stored=$(systemctl show -p NFileDescriptorStore --value activatord)
[ "${stored:-0}" -ge 1 ] && ok fd-store || fail fd-store "NFileDescriptorStore=$stored"

# A crash: systemd restarts the daemon; the generation lives on.
main=$(systemctl show -p MainPID --value activatord)
systemctl kill --kill-who=main --signal=SIGKILL activatord
for _ in $(seq 100); do
    now=$(systemctl show -p MainPID --value activatord)
    [ "$now" != "$main" ] && [ "$now" != 0 ] &&
        [ "$(systemctl is-active activatord)" = active ] && break
    sleep 0.2
done
[ "$now" != "$main" ] && [ "$now" != 0 ] && ok restarted-after-crash ||
    fail restarted-after-crash "MainPID $main -> $now"
if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then ok survives-crash; else
    fail survives-crash "app pid $pid is gone"; fi
: >/results/status.txt
ASAN_OPTIONS=detect_leaks=0 activatorctl --no-color status demo >/results/status.txt 2>&1
grep -q "serving" /results/status.txt && grep -q " $pid " /results/status.txt && ok resumed ||
    fail resumed "$(cat /results/status.txt)"
again=$(get)
[ -n "$pid" ] && [ "$(pid_of "$again")" = "$pid" ] && ok same-generation-answers ||
    fail same-generation-answers "got: $again"

# A restart hands over (RestartKillSignal=): ten of them under a client that
# never pauses; the app keeps its pid, every request is answered, and the
# daemon's pid changes each time.
rm -f /tmp/client-stop /tmp/client-failures /tmp/client-answers
(
    failures=0 answers=0
    while [ ! -e /tmp/client-stop ]; do
        case $(get) in *"pid=$pid"*) answers=$((answers + 1)) ;; *) failures=$((failures + 1)) ;; esac
    done
    echo "$failures" >/tmp/client-failures
    echo "$answers" >/tmp/client-answers
) &
client=$!
handovers=0
for _ in $(seq 10); do
    before=$(systemctl show -p MainPID --value activatord)
    # Ten restarts in a few seconds would hit systemd's start limit (five in
    # ten seconds), which is there for crash loops, not for this test.
    systemctl reset-failed activatord
    systemctl restart activatord || break
    after=$(systemctl show -p MainPID --value activatord)
    [ "$after" != "$before" ] && [ "$after" != 0 ] && handovers=$((handovers + 1))
done
touch /tmp/client-stop
wait "$client"
[ "$handovers" = 10 ] && ok restart-new-daemon || fail restart-new-daemon "$handovers of 10"
if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then ok restart-keeps-app; else
    fail restart-keeps-app "app pid $pid is gone"; fi
[ "$(cat /tmp/client-failures)" = 0 ] && [ "$(cat /tmp/client-answers)" -gt 0 ] &&
    ok restart-no-failed-request ||
    fail restart-no-failed-request "$(cat /tmp/client-failures) failed, $(cat /tmp/client-answers) answered"
answer=$(get)
case $answer in *"pid=$pid"*) ok serves-after-restart ;; *) fail serves-after-restart "got: $answer" ;; esac

# Reload: a host file added is served after systemctl reload, and the other
# host keeps its generation; a broken edit makes systemctl reload fail (its
# ExecReload= waits for activatorctl reload) and changes nothing.
cat >/etc/activator/hosts/second.conf <<'EOT'
[Host]
Exec=act-testapp
Ready=notify
ReadyTimeoutSec=10
StopTimeoutSec=5
[Listen]
ListenStream=127.0.0.1:18081
EOT
systemctl reload activatord && ok reload-adds-host || fail reload-adds-host "systemctl reload failed"
ctl stage second v1 /opt/act-testapp --promote || fail reload-stage "see activatorctl.txt"
second=$(curl -s --max-time 5 http://127.0.0.1:18081/)
case $second in *"version=v1"*) ok reload-host-serves ;; *) fail reload-host-serves "got: $second" ;; esac
case $(get) in *"pid=$pid"*) ok reload-keeps-others ;; *) fail reload-keeps-others "demo's pid changed" ;; esac
echo "NoSuchKey=1" >>/etc/activator/hosts/second.conf
if systemctl reload activatord; then fail reload-refuses-broken "systemctl reload succeeded";
else ok reload-refuses-broken; fi
again=$(curl -s --max-time 5 http://127.0.0.1:18081/)
[ "$(pid_of "$again")" = "$(pid_of "$second")" ] && ok broken-reload-changes-nothing ||
    fail broken-reload-changes-nothing "got: $again"
rm /etc/activator/hosts/second.conf
systemctl reload activatord && ok reload-removes-host || fail reload-removes-host "systemctl reload failed"
if curl -s --max-time 5 http://127.0.0.1:18081/ >/dev/null; then
    fail removed-host-refuses "127.0.0.1:18081 still answers"
else ok removed-host-refuses; fi

systemctl stop activatord
if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then fail stop-retires "app pid $pid runs";
else ok stop-retires; fi
leftover=$(find "$cg/system.slice/activatord.service/hosts" -mindepth 2 -type d 2>/dev/null)
[ -z "$leftover" ] && ok no-leaves-left || fail no-leaves-left "$leftover"
[ "$(systemctl is-failed activatord)" != failed ] && ok clean-stop ||
    fail clean-stop "the unit failed"

journalctl -u activatord --no-pager >/results/journal.txt 2>&1
echo done >>"$out"
systemctl poweroff
EOF
chmod +x "$work/act-check"

nspawn_boot_activator 180 "$root" "$work"
nspawn_report "$work/results/checks.txt"
grep -q '^FAIL' "$work/results/checks.txt" 2>/dev/null && nspawn_status=1
nspawn_finish 60 activatorctl.txt journal.txt console.txt
exit $nspawn_status
