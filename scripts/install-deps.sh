#!/usr/bin/env bash
# Installs every Debian 12 package that building, testing and running the
# activator needs. Cheap when they are already there: apt-get runs only for
# what is missing, so the README commands stay fast on a prepared machine.
set -euo pipefail

packages=(
  # build
  build-essential clang meson ninja-build pkg-config cmake
  # libFuzzer and the sanitizer runtimes for clang (the fuzz targets)
  libclang-rt-14-dev
  # libraries (see meson.build)
  libsystemd-dev libseccomp-dev libnng-dev libcmocka-dev libcgroup-dev
  libssl-dev libjson-c-dev libinih-dev libcurl4-openssl-dev
  # checkpoints of a host's state directory: tar + zstd
  libarchive-dev
  # the metrics endpoint's HTTP server
  libmicrohttpd-dev
  # NNG's TLS library, which activatord's own NNG TLS engine uses as well
  libmbedtls-dev
  # tests: a real etcd, curl for the HTTP baselines, systemd tools for unit checks,
  # openssl to make the TLS tests' certificates, and a Debian root booted with
  # systemd-nspawn for the unit under a real service manager
  etcd-server etcd-client curl systemd coreutils iproute2 openssl
  # promtool, which checks a real daemon's metrics (daemon-metrics)
  prometheus
  # bench-checkpoint's baseline: tar | zstd by hand
  tar zstd
  # images made by standard tools for the image tests: umoci makes the
  # layers (its own whiteouts), skopeo pushes them to a real registry
  umoci skopeo docker-registry
  systemd-container debootstrap
  # the manual pages (scdoc source, roff built at build time)
  scdoc
  # the Debian package (scripts/package.sh) and its checks
  debhelper dpkg-dev lintian
)

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps: missing packages: ${missing[*]}; run as root (sudo $0)" >&2
    exit 1
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # etcd-server's package starts a system etcd on the default ports; the tests
  # start their own on free loopback ports and never use it.
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
  # docker-registry's package starts a registry on :5000 of every address;
  # the tests want its binary only and start their own on loopback. One this
  # script installed is stopped and disabled again (one installed before is
  # the machine's own and left alone).
  if [[ " ${missing[*]} " == *" docker-registry "* ]] && [[ -d /run/systemd/system ]]; then
    systemctl disable --now docker-registry.service >/dev/null 2>&1 || true
  fi
fi
