#!/bin/sh
# install-deb-under-systemd.sh SOURCE-DIR TESTAPP
#
# The Debian package on a booted Debian 12: builds it (scripts/package.sh,
# which keeps its build directory, so this is quick after the first time),
# boots systemd in systemd-nspawn on a throwaway overlay over the root
# container-root.sh makes (the one units-boot boots), and checks there, as an
# operator installing it on a box would:
#   - dpkg -i installs it: the unit is enabled but not started, the groups
#     of sysusers.d and the directories of tmpfiles.d are there, and nothing
#     is live configuration (the examples are under /usr/share/doc);
#   - with an activatord.conf made from the example, systemctl start starts
#     it, and activatorctl version answers on the default socket;
#   - man activatorctl (and activatord, activatord.conf) renders;
#   - a demo host, staged and woken, answers, as a user of its own;
#   - installing the package again (an upgrade, as the maintainer scripts
#     see it) restarts the daemon by a handover: a new daemon, the same app;
#   - apt-get remove stops it cleanly: no app, no generation's cgroup left;
#   - apt-get purge removes /etc/activator and /var/lib/activator.
# TESTAPP is act-testapp, staged as the demo host's build.
set -eu
source_dir=$(realpath "$1") testapp=$(realpath "$2")

if [ "$(id -u)" -ne 0 ]; then
    echo "skip: building the package's maintainer scripts and booting a container need root"
    exit 77
fi
for tool in systemd-nspawn dpkg-buildpackage; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "FAIL: $tool is missing (scripts/install-deps.sh installs it)"
        exit 1
    fi
done

started=$(date +%s)
if ! "$source_dir/scripts/package.sh" >/tmp/act-package-$$.log 2>&1; then
    echo "FAIL: scripts/package.sh:"
    tail -40 /tmp/act-package-$$.log
    rm -f /tmp/act-package-$$.log
    exit 1
fi
rm -f /tmp/act-package-$$.log
version=$(cd "$source_dir" && dpkg-parsechangelog -S Version)
deb=$source_dir/build/package/activator_${version}_$(dpkg-architecture -q DEB_HOST_ARCH).deb
[ -f "$deb" ] || { echo "FAIL: $deb was not built"; exit 1; }
echo "ok package built in $(($(date +%s) - started)) s: $deb"

. "$(dirname "$0")/nspawn-lib.sh"
root=$("$(dirname "$0")/container-root.sh") || exit 1

nspawn_make_work act-deb

mkdir -p "$work/results"
cat >"$work/act-check.service" <<'EOF2'
[Unit]
Description=activator package checks under systemd
After=multi-user.target
[Service]
Type=oneshot
ExecStart=/usr/local/bin/act-check
EOF2
cat >"$work/act-check" <<'EOF2'
#!/bin/sh
# Inside the container, as root. One line per check in /results/checks.txt.
out=/results/checks.txt
ok() { echo "ok $1" >>"$out"; }
fail() { echo "FAIL $1: $2" >>"$out"; }
log() { "$@" >>/results/commands.txt 2>&1; }
get() { curl -s --max-time 5 http://127.0.0.1:18080/; }
pid_of() { printf '%s' "$1" | sed -n 's/.*pid=\([0-9]*\).*/\1/p'; }
cg=$(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo)
export DEBIAN_FRONTEND=noninteractive

echo "+ dpkg -i" >>/results/commands.txt
log dpkg -i /opt/activator.deb && ok installed || fail installed "dpkg -i failed; see commands.txt"
[ "$(systemctl is-enabled activatord)" = enabled ] && ok enabled ||
    fail enabled "is-enabled says $(systemctl is-enabled activatord)"
[ "$(systemctl is-active activatord)" = inactive ] && ok not-started-on-install ||
    fail not-started-on-install "is-active says $(systemctl is-active activatord)"
getent group activator >/dev/null && getent group activator-view >/dev/null && ok sysusers-groups ||
    fail sysusers-groups "the groups activator and activator-view are missing"
[ "$(stat -c %a /var/lib/activator/hosts 2>/dev/null)" = 711 ] &&
    [ "$(stat -c %a /var/lib/activator/claims 2>/dev/null)" = 700 ] && ok tmpfiles ||
    fail tmpfiles "/var/lib/activator/hosts or claims is missing or has another mode"
[ ! -e /etc/activator/activatord.conf ] && [ -z "$(ls -A /etc/activator/hosts 2>/dev/null)" ] &&
    [ -f /usr/share/doc/activator/examples/activatord.conf ] &&
    [ -f /usr/share/doc/activator/examples/hosts/web1.conf ] && ok examples-not-live ||
    fail examples-not-live "$(ls -R /etc/activator /usr/share/doc/activator 2>&1 | tr '\n' ' ')"

# The operator's part: the example, this box's id, a host.
sed 's/^Box=.*/Box=deb-box/' /usr/share/doc/activator/examples/activatord.conf \
    >/etc/activator/activatord.conf
cat >/etc/activator/hosts/demo.conf <<'EOT'
[Host]
Exec=act-testapp
Ready=notify
ReadyTimeoutSec=10
StopTimeoutSec=5
IdleTimeoutSec=0
[Listen]
ListenStream=127.0.0.1:18080
EOT
log activatord --check-config && ok check-config || fail check-config "see commands.txt"
log systemctl start activatord
[ "$(systemctl is-active activatord)" = active ] && ok started ||
    fail started "is-active says $(systemctl is-active activatord)"
version=$(activatorctl --no-color version 2>&1) && answered=yes || answered=
echo "$version" >>/results/commands.txt
case $answered$version in yes*"(box deb-box)"*) ok version-answers ;; *) fail version-answers "$version" ;; esac

for page in 1:activatorctl 8:activatord 5:activatord.conf; do
    text=$(MANPAGER=cat MANWIDTH=80 man "${page%%:*}" "${page#*:}" 2>/results/man-errors.txt)
    case $text in *NAME*"${page#*:}"*) ok "man-${page#*:}" ;;
    *) fail "man-${page#*:}" "$(head -3 /results/man-errors.txt)" ;; esac
done

log activatorctl --no-color stage demo v1 /opt/act-testapp --promote && ok stage || fail stage "see commands.txt"
log activatorctl --no-color wake demo && ok wake || fail wake "see commands.txt"
answer=$(get)
case $answer in *"version=v1"*) ok answers ;; *) fail answers "got: $answer" ;; esac
pid=$(pid_of "$answer")
uid=$(awk '$1 == "Uid:" { print $2 }' "/proc/$pid/status" 2>/dev/null)
[ -n "$uid" ] && [ "$uid" -ge 1879048192 ] && [ "$uid" -le 1879113727 ] && ok dynamic-user ||
    fail dynamic-user "the app runs as uid $uid"

# The same package again: dpkg runs the maintainer scripts of an upgrade
# (preinst upgrade, postinst configure OLD-VERSION), so the postinst
# try-restarts the unit, a handover.
main=$(systemctl show -p MainPID --value activatord)
echo "+ dpkg -i (again)" >>/results/commands.txt
log dpkg -i /opt/activator.deb && ok upgrade-installed || fail upgrade-installed "see commands.txt"
now=$(systemctl show -p MainPID --value activatord)
[ "$(systemctl is-active activatord)" = active ] && [ "$now" != "$main" ] && [ "$now" != 0 ] &&
    ok upgrade-restarts-daemon || fail upgrade-restarts-daemon "MainPID $main -> $now"
if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then ok upgrade-keeps-app; else
    fail upgrade-keeps-app "app pid $pid is gone"; fi
case $(get) in *"pid=$pid"*) ok upgrade-app-answers ;; *) fail upgrade-app-answers "no answer from pid $pid" ;; esac
version=$(activatorctl --no-color version 2>&1)
echo "$version" >>/results/commands.txt
case $version in *", 1 by handover"*) ok upgrade-was-handover ;; *) fail upgrade-was-handover "$version" ;; esac

echo "+ apt-get remove" >>/results/commands.txt
log apt-get remove -y activator && ok removed || fail removed "see commands.txt"
state=$(systemctl is-active activatord)
[ "$state" = inactive ] && ok remove-stops || fail remove-stops "activatord is $state"
[ "$(systemctl is-failed activatord)" != failed ] && ok remove-clean-stop ||
    fail remove-clean-stop "the unit failed"
if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then fail remove-no-app "app pid $pid runs";
else ok remove-no-app; fi
leftover=$(find "$cg/system.slice/activatord.service" -mindepth 1 -type d 2>/dev/null)
[ -z "$leftover" ] && ok remove-no-cgroup-left || fail remove-no-cgroup-left "$leftover"
[ ! -e /usr/sbin/activatord ] && [ -f /etc/activator/activatord.conf ] && ok remove-keeps-config ||
    fail remove-keeps-config "activatord or the configuration is not as remove leaves them"

echo "+ apt-get purge" >>/results/commands.txt
log apt-get purge -y activator && ok purged || fail purged "see commands.txt"
[ ! -e /etc/activator ] && [ ! -e /var/lib/activator ] && ok purge-removes-config-and-state ||
    fail purge-removes-config-and-state "$(ls -d /etc/activator /var/lib/activator 2>&1 | tr '\n' ' ')"
[ ! -e /etc/systemd/system/multi-user.target.wants/activatord.service ] && ok purge-disables ||
    fail purge-disables "the multi-user.target.wants link is left"

journalctl -u activatord --no-pager >/results/journal.txt 2>&1
echo done >>"$out"
systemctl poweroff
EOF2
chmod +x "$work/act-check"

nspawn_boot 240 "$root" "$work" \
    --bind-ro="$deb:/opt/activator.deb" \
    --bind-ro="$testapp:/opt/act-testapp"
nspawn_report "$work/results/checks.txt"
grep -q '^FAIL' "$work/results/checks.txt" 2>/dev/null && nspawn_status=1
nspawn_finish 60 commands.txt journal.txt console.txt
echo "package built, installed, used, upgraded, removed and purged in $(($(date +%s) - started)) s"
exit $nspawn_status
