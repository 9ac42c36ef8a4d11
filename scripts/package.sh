#!/usr/bin/env bash
# Builds the Debian package: build/package/activator_<version>_amd64.deb
# (with its .buildinfo and .changes), then runs lintian over it. The build
# directory (build/deb, configured as debian/rules configures it) is kept,
# so a second run compiles only what changed. Options go to
# dpkg-buildpackage.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh

export ACT_BUILDDIR=build/deb
out=build/package
version=$(dpkg-parsechangelog -S Version)
arch=$(dpkg-architecture -q DEB_HOST_ARCH)
meson_version=$(sed -n "s/^  version: '\(.*\)',$/\1/p" meson.build)
if [[ $version != "$meson_version" ]]; then
    echo "package: debian/changelog says $version, meson.build says $meson_version;" \
        "add a changelog entry (dch -v $meson_version)" >&2
    exit 1
fi

# dpkg-buildpackage writes beside the source tree; each file is moved to
# $out as soon as it is there, so that nothing is left in the parent
# directory, which other checkouts share.
names=("activator_${version}_${arch}.deb" "activator-dbgsym_${version}_${arch}.deb"
    "activator_${version}_${arch}.buildinfo" "activator_${version}_${arch}.changes")
rm -f "${names[@]/#/../}"
mkdir -p "$out"
rm -f "$out"/activator*
status=0
dpkg-buildpackage -us -uc -b "$@" >"$out/build.log" 2>&1 || status=$?
for name in "${names[@]}"; do
    if [[ -e ../$name ]]; then mv "../$name" "$out/"; fi
done
if [[ $status -ne 0 ]]; then
    tail -40 "$out/build.log" >&2
    echo "package: dpkg-buildpackage failed ($status); the whole log is $out/build.log" >&2
    exit "$status"
fi
echo "package: $out/activator_${version}_${arch}.deb"

# Errors and warnings fail the build; each tag that stays is explained in
# debian/activator.lintian-overrides or debian/source/lintian-overrides.
lintian --fail-on error,warning --display-info "$out/activator_${version}_${arch}.changes"
