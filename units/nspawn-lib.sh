# nspawn-lib.sh: sourced by the scripts that boot Debian with systemd as
# PID 1 in systemd-nspawn (boot-, hostile- and install-deb-under-systemd.sh);
# the plumbing that lets nspawn run on a machine that has no systemd of its
# own.
#
#   nspawn_make_work NAME   makes the script's work directory, /tmp/NAME-XXXXXX,
#                           in $work, and an EXIT trap that cleans up
#                           (nspawn_cleanup) and removes it
#   nspawn_prepare          waits for the containers of the other tests to
#                           end (they share the propagation tmpfs, which the
#                           last one out would unmount under the others),
#                           then a cgroup subtree of our own for nspawn's
#                           payload/ and supervisor/ cgroups, and a tmpfs for
#                           its propagation directory where /run is not one
#   nspawn_cleanup          removes them; sets nspawn_left=yes when a cgroup
#                           could not be removed (something was left in it)
#   nspawn_boot SECONDS ROOT WORK [OPTION...]
#                           prepares (as above) and boots ROOT with systemd as
#                           PID 1 on a throwaway overlay, in a network of its
#                           own, for at most SECONDS; it starts WORK/act-check
#                           (as act-check.service, WORK/act-check.service) with
#                           WORK/results bound at /results, and the console
#                           goes to WORK/results/console.txt; OPTIONs are the
#                           script's own nspawn options (its --bind-ro= lines).
#                           Sets nspawn_rc to nspawn's exit status.
#   nspawn_boot_activator SECONDS ROOT WORK [OPTION...]
#                           nspawn_boot with the binaries and the unit of the
#                           tests that run activatord.service as shipped:
#                           $activatord, $activatorctl and $testapp (at
#                           /opt/act-testapp), $service with WORK/dropin as
#                           its drop-in directory, $tmpfiles, and WORK/etc
#                           as /etc/activator
#   nspawn_report FILE      what the container left: says FAIL when nspawn
#                           failed, prints FILE (the checks' lines), and sets
#                           nspawn_status=1 when FILE is missing or has no
#                           closing "done" line; the script adds its own
#                           checks of FILE to nspawn_status after this
#   nspawn_finish LINES LOG...
#                           cleans up (nspawn_status=1 if a cgroup is left),
#                           and when nspawn_status is not 0, prints the last
#                           LINES lines of each LOG in WORK/results there is

nspawn_box=act-nspawn-$$
nspawn_subtrees=
nspawn_mounted_run=
nspawn_left=

# nspawn (with --keep-unit and no systemd on the host to ask for a scope)
# makes its cgroups in the cgroup it runs in, so it runs in a subtree of our
# own, in the cgroup2 hierarchy and in systemd's named v1 one where there is
# one.
nspawn_enter_own_cgroups() {
    v2=$(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo)
    named=$(awk '$9 == "cgroup" && $NF ~ /name=systemd/ { print $5; exit }' /proc/self/mountinfo)
    for spec in "$v2:0::" "$named:[0-9]*:name=systemd:"; do
        mount=${spec%%:*}
        [ -n "$mount" ] || continue
        own=$(sed -n "s/^${spec#*:}//p" /proc/self/cgroup | head -1)
        dir=$mount${own%/}/$nspawn_box
        mkdir "$dir"
        echo $$ >"$dir/cgroup.procs"
        nspawn_subtrees="$nspawn_subtrees $mount${own%/}:$dir"
    done
}

nspawn_make_work() {
    work=$(mktemp -d "/tmp/$1-XXXXXX")
    trap 'nspawn_cleanup; rm -rf "$work"' EXIT
}

nspawn_prepare() {
    # One container at a time: fd 9 holds the lock until this shell exits.
    exec 9>/run/activator-tests-nspawn.lock
    flock 9
    # nspawn keeps its mount-propagation directory below /run/systemd/nspawn
    # and expects a tmpfs there (where /run is not one).
    if [ "$(stat -f -c %T /run)" != tmpfs ] && ! mountpoint -q /run/systemd/nspawn; then
        mkdir -p /run/systemd/nspawn
        mount -t tmpfs -o mode=0755 tmpfs /run/systemd/nspawn
        nspawn_mounted_run=yes
    fi
    nspawn_enter_own_cgroups
}

nspawn_cleanup() {
    for pair in $nspawn_subtrees; do
        parent=${pair%%:*} dir=${pair#*:}
        echo $$ >"$parent/cgroup.procs" 2>/dev/null || true
        find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null || true
        if [ -d "$dir" ]; then echo "FAIL: cgroup $dir is left behind"; nspawn_left=yes; fi
    done
    nspawn_subtrees=
    if [ -n "$nspawn_mounted_run" ]; then
        umount /run/systemd/nspawn 2>/dev/null || true
        nspawn_mounted_run=
    fi
}

nspawn_boot() {
    seconds=$1 nspawn_root=$2 nspawn_work=$3
    shift 3
    echo "booting the container"
    nspawn_prepare
    set +e
    timeout "$seconds" systemd-nspawn --quiet --register=no --keep-unit --private-network \
        --volatile=overlay --console=pipe -D "$nspawn_root" \
        "$@" \
        --bind-ro="$nspawn_work/act-check.service:/etc/systemd/system/act-check.service" \
        --bind-ro="$nspawn_work/act-check:/usr/local/bin/act-check" \
        --bind="$nspawn_work/results:/results" \
        -b -- systemd.unit=multi-user.target systemd.wants=act-check.service \
        >"$nspawn_work/results/console.txt" 2>&1
    nspawn_rc=$?
    set -e
}

nspawn_boot_activator() {
    boot_seconds=$1 boot_root=$2 boot_work=$3
    shift 3
    nspawn_boot "$boot_seconds" "$boot_root" "$boot_work" \
        --bind-ro="$activatord:/usr/local/sbin/activatord" \
        --bind-ro="$activatorctl:/usr/local/bin/activatorctl" \
        --bind-ro="$testapp:/opt/act-testapp" \
        --bind-ro="$service:/etc/systemd/system/activatord.service" \
        --bind-ro="$boot_work/dropin:/etc/systemd/system/activatord.service.d" \
        --bind-ro="$tmpfiles:/etc/tmpfiles.d/activator.conf" \
        --bind="$boot_work/etc:/etc/activator" \
        "$@"
}

nspawn_report() {
    nspawn_status=0
    if [ "$nspawn_rc" -ne 0 ]; then
        echo "FAIL: the container exited $nspawn_rc"
        nspawn_status=1
    fi
    if [ -f "$1" ]; then
        cat "$1"
    else
        echo "FAIL: the checks never ran"
        nspawn_status=1
    fi
    grep -qx done "$1" 2>/dev/null || nspawn_status=1
}

nspawn_finish() {
    lines=$1
    shift
    nspawn_cleanup
    [ -z "$nspawn_left" ] || nspawn_status=1
    [ "$nspawn_status" -ne 0 ] || return 0
    for f in "$@"; do
        [ -f "$nspawn_work/results/$f" ] || continue
        echo "---- $f ----"
        tail -"$lines" "$nspawn_work/results/$f"
    done
}
