#!/bin/sh
# check-install.sh BUILD-DIR PATH... : `meson install` into a scratch DESTDIR
# puts each PATH (absolute, as configured: prefix, unit directory, ...) in
# place, and nothing that is not for an installed box:
#   - the unit names the installed activatord and activatorctl, and every
#     @placeholder@ is substituted;
#   - the man pages are roff that man renders without a warning;
#   - the examples are under the documentation, never live configuration
#     (no activatord.conf or host file under an etc/);
#   - no test program, benchmark or static library is installed.
# A PATH that ends in "/" must be a directory, any other a file.
set -u
build=$1
shift

destdir=$(mktemp -d /tmp/act-install-XXXXXX)
trap 'rm -rf "$destdir"' EXIT
if ! out=$(meson install -C "$build" --no-rebuild --destdir "$destdir" 2>&1); then
    echo "FAIL: meson install --destdir $destdir:"
    echo "$out" | tail -20
    exit 1
fi

status=0
for path in "$@"; do
    case $path in
    */) test -d "$destdir$path" ;;
    *) test -f "$destdir$path" ;;
    esac || {
        echo "FAIL: $path is not installed"
        status=1
    }
done
[ "$status" -eq 0 ] && echo "ok: every expected path is installed ($# of them)"

for unit in $(find "$destdir" -name activatord.service); do
    if grep -n '@[a-z_]*@' "$unit"; then
        echo "FAIL: $unit keeps a placeholder"
        status=1
    fi
    for key in ExecStart ExecReload; do
        program=$(sed -n "s/^$key=\([^ ]*\).*/\1/p" "$unit")
        if [ ! -x "$destdir$program" ]; then
            echo "FAIL: $key= names $program, which is not an installed program"
            status=1
        fi
    done
done

if command -v man >/dev/null 2>&1; then
    for page in $(find "$destdir" -path '*/man/man[0-9]/*' -type f); do
        warnings=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
        if [ -n "$warnings" ]; then
            echo "FAIL: man -l $page warns:"
            echo "$warnings" | head -5
            status=1
        fi
    done
fi

live=$(find "$destdir" -path '*/etc/*' \( -name 'activatord.conf' -o -path '*/hosts/*.conf' \))
if [ -n "$live" ]; then
    echo "FAIL: live configuration installed: $live"
    status=1
fi
unwanted=$(find "$destdir" \( -name 'act-*' -o -name 'test_*' -o -name 'bench-*' -o -name '*.a' \) \
    -type f)
if [ -n "$unwanted" ]; then
    echo "FAIL: installed but not for a box: $unwanted"
    status=1
fi
echo "installed:"
(cd "$destdir" && find . -type f | sort | sed 's/^\./  /')
exit $status
