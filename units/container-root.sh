#!/bin/sh
# container-root.sh: prints the path of a Debian 12 root for the tests that
# boot systemd in systemd-nspawn (boot-under-systemd.sh), making it first if
# it is not there: debootstrap --variant=minbase with systemd and the
# libraries the (sanitized) binaries link, about 80 s and 260 MB; man-db and
# what the .deb depends on for the package's install test. It is kept
# in /var/cache/activator-tests and reused while the package list is the
# same. scripts/test.sh runs it before the tests, so that the download does
# not run beside them.
set -eu
packages=systemd,systemd-sysv,dbus,curl,libnng1,libseccomp2,libcgroup2,libjson-c5,libinih1
packages=$packages,libcurl4,libssl3,libarchive13,libasan8,libubsan1
# The metrics endpoint's HTTP server.
packages=$packages,libmicrohttpd12
# The package's install test (install-deb-under-systemd.sh): what the .deb
# depends on beyond the above, and man to render its manual pages.
packages=$packages,libmbedtls14,man-db
# nss-systemd, which asks the daemon's user database service for the hosts'
# users (boot-under-systemd.sh checks getent).
packages=$packages,libnss-systemd
cache=/var/cache/activator-tests
root=$cache/bookworm-$(printf '%s' "$packages" | sha256sum | cut -c1-12)
if [ ! -e "$root/.complete" ]; then
    if ! command -v debootstrap >/dev/null 2>&1; then
        echo "container-root: debootstrap is missing (scripts/install-deps.sh installs it)" >&2
        exit 1
    fi
    echo "container-root: making $root with debootstrap (once)" >&2
    rm -rf "$root"
    mkdir -p "$cache"
    # From the Debian mirror apt on this machine is set up with (deb822 or
    # the classic sources.list); debootstrap's own default where none is.
    mirror=$(awk '/^URIs:/ { uri = $2 } /^Suites:/ && / bookworm( |$)/ && uri { print uri; exit }' \
        /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
    [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }' \
        /etc/apt/sources.list 2>/dev/null || true)
    if ! debootstrap --variant=minbase --include="$packages" bookworm "$root" ${mirror:+"$mirror"} \
        >"$cache/debootstrap.log" 2>&1; then
        echo "container-root: debootstrap failed; see $cache/debootstrap.log:" >&2
        tail -20 "$cache/debootstrap.log" >&2
        exit 1
    fi
    touch "$root/.complete"
fi
echo "$root"
