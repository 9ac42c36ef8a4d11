#!/bin/sh
# check-units.sh SERVICE TMPFILES-CONF: what systemd itself says about the
# units. systemd-analyze verify exits 0 even on unknown keys and only prints
# a warning, so any output counts as a failure. The tmpfiles entry is
# applied to a scratch root and the result checked.
set -u
service=$1
tmpfiles_conf=$2

if ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "skip: systemd-analyze is not installed (apt-get install systemd)"
    exit 77
fi

status=0
out=$(systemd-analyze verify --man=no "$service" 2>&1)
rc=$?
if [ "$rc" -ne 0 ] || [ -n "$out" ]; then
    echo "FAIL: systemd-analyze verify $service (exit $rc):"
    echo "$out"
    status=1
else
    echo "ok: systemd-analyze verify $service"
fi

# The directives this service must have, each for a reason in the unit.
for line in 'Type=notify' 'Delegate=yes' 'Restart=always' 'KillMode=process' \
    'OOMPolicy=continue'; do
    if ! grep -qx "$line" "$service"; then
        echo "FAIL: $service lacks $line"
        status=1
    fi
done
for key in WatchdogSec TimeoutAbortSec FileDescriptorStoreMax ExecReload; do
    if ! grep -q "^$key=" "$service"; then
        echo "FAIL: $service lacks $key="
        status=1
    fi
done
# The hosts' tasks together are bounded (a percentage of the box's limit).
tasks_max=$(sed -n 's/^TasksMax=//p' "$service")
case $tasks_max in
'' | infinity)
    echo "FAIL: $service must bound the hosts' tasks with a finite TasksMax= (has '${tasks_max}')"
    status=1
    ;;
esac
# RestrictNamespaces= turns clone3() into ENOSYS; ProtectControlGroups=
# makes the delegated cgroup read-only.
for key in RestrictNamespaces ProtectControlGroups ProtectKernelTunables; do
    if grep -q "^$key=" "$service"; then
        echo "FAIL: $service sets $key=, which breaks starting generations"
        status=1
    fi
done

if command -v systemd-tmpfiles >/dev/null 2>&1; then
    root=$(mktemp -d /tmp/act-units-root-XXXXXX)
    trap 'rm -rf "$root"' EXIT
    if ! out=$(systemd-tmpfiles --create --root="$root" "$(realpath "$tmpfiles_conf")" 2>&1) ||
        [ -n "$out" ]; then
        echo "FAIL: systemd-tmpfiles --create $tmpfiles_conf:"
        echo "$out"
        status=1
    fi
    for spec in 755:/etc/activator/hosts 755:/run/activator 755:/var/lib/activator/releases \
        711:/var/lib/activator/hosts 700:/var/lib/activator/claims \
        700:/var/lib/activator/dynamic-users; do
        mode=${spec%%:*}
        dir=${spec#*:}
        got=$(stat -c %a "$root$dir" 2>/dev/null || echo missing)
        if [ "$got" != "$mode" ]; then
            echo "FAIL: tmpfiles made $dir with mode $got, expected $mode"
            status=1
        fi
    done
    [ "$status" -eq 0 ] && echo "ok: systemd-tmpfiles creates every directory"
else
    echo "note: systemd-tmpfiles is not installed; the tmpfiles entry was not applied"
fi
exit $status
