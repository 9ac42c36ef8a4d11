# nspawn-lib.sh: sourced by the scripts that boot Debian with systemd as
# PID 1 in systemd-nspawn (hostile-under-systemd.sh); the plumbing that lets
# nspawn run on a machine that has no systemd of its own.
#
#   nspawn_prepare          a cgroup subtree of our own for nspawn's payload/
#                           and supervisor/ cgroups, and a tmpfs for its
#                           propagation directory where /run is not one
#   nspawn_cleanup          removes them; sets nspawn_left=yes when a cgroup
#                           could not be removed (something was left in it)

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

nspawn_prepare() {
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
