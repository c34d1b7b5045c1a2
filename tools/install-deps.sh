#!/bin/sh
# Install what this repository needs on a platform of pgo/platforms.toml (Debian 12 or 13), as root.
#   tools/install-deps.sh build   a release: the MariaDB PGO build (compilers, MariaDB's build
#                                 dependencies), its packages and the benchmark
#   tools/install-deps.sh test    also what the tests, the package proofs and the linters use
#   tools/install-deps.sh vm      only what a host of VM workers (kind = "libvirt") and its master need:
#                                 QEMU, libvirt's daemons, the master's libvirt binding
set -eu
what=${1:-build}
case "$what" in
  build|test|vm) ;;
  *) echo "usage: $0 build|test|vm" >&2; exit 2 ;;
esac
repo=$(cd "$(dirname "$0")/.." && pwd)

export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# What differs by release comes from the platform table (pgo/base/platforms.py, standard library only):
# this machine's platform ($PGO_PLATFORM, else its /etc/os-release), refused in one line when the
# table has none. A minimal system may lack python3 itself.
command -v python3 >/dev/null || apt-get install -y -q --no-install-recommends python3
if [ "$what" = vm ]; then
  # qemu-system-x86: the VMs (QEMU's emulation, or KVM where a guest boots: the worker's domain_type);
  # qemu-utils: the per-build overlay (qemu-img); libvirt-daemon-system: libvirtd and virtlogd (started
  # by systemd, or by hand where there is none: tests/test_vm_worker.py does). libvirt-dev, pkg-config,
  # gcc and python3-dev build requirements/libvirt.txt's binding (PyPI has its source only).
  apt-get install -y -q --no-install-recommends qemu-system-x86 qemu-utils libvirt-daemon-system \
    libvirt-dev pkg-config gcc python3-dev
  python3 -m pip install -q -r "$repo/requirements/libvirt.txt"
  # /dev/kvm as udev leaves it (root:kvm 0660, QEMU's user libvirt-qemu is in kvm) where no udev ran (a
  # container host: root:root 0600). Otherwise libvirt finds KVM when it probes QEMU's capabilities as
  # root but not when it checks them as libvirt-qemu, throws its cache away at each lookup, and probes
  # again, 4 s each: starting a domain took 84 s here instead of 0.4 s. A TCG domain needs no KVM.
  if [ -c /dev/kvm ] && [ "$(stat -c %G /dev/kvm)" != kvm ] && getent group kvm >/dev/null; then
    chgrp kvm /dev/kvm && chmod 660 /dev/kvm
    echo "install-deps: /dev/kvm is root:kvm 0660, as udev sets it"
  fi
  exit 0
fi
platform() { (cd "$repo" && python3 -m pgo.base.platforms host --field "$1"); }
name=$(platform name)
compilers="$(platform compiler.cc) $(platform compiler.cxx)"
bolt=$(platform bolt)
echo "install-deps: platform $name ($(platform codename)): $compilers, bolt-$bolt"

# checkpolicy and semodule-utils: MariaDB's -DRPM build compiles its SELinux policy module (and
# the fixture's, with checkmodule, for the tests of the rpm tree).
# The platform's compiler by name (gcc, g++ are the release's default, which may be another one).
# bolt-N and libbolt-N-dev (its instrumentation runtime): the bolt phase of a configuration with
# `bolt = true` (pgo/build/bolt.py); N is the platform's (`bolt`: 19, the newest in bookworm's main archive).
# debhelper, dh-exec, po-debconf and fakeroot: the debs of a configuration with `debian_rules = true`
# come from the Debian source package's own debian/rules (pgo/packaging/debrules.py; Debian's mariadb rules
# use dh-exec in its .install files and po-debconf for its debconf templates).
build_packages="gcc g++ $compilers cmake ninja-build bison pkg-config git
  libncurses-dev libssl-dev zlib1g-dev libfmt-dev libpcre2-dev libaio-dev liburing-dev
  libpam0g-dev libsystemd-dev libxml2-dev libcurl4-openssl-dev
  mariadb-client libmariadb-dev sysbench
  dpkg-dev binutils rpm cpio checkpolicy semodule-utils
  debhelper dh-exec po-debconf fakeroot
  bolt-$bolt libbolt-$bolt-dev"
# A real server for the tests, the benchmark's callgrind, and the package proofs
# (rpmlint, lintian, a Debian chroot for the .deb, Debian's piuparts for `pgo prove --piuparts`).
# mariadb-plugin-rocksdb: ha_rocksdb.so, which profile_load's rocksdb cells load into that server.
# docker.io, tini and zstd: the container worker's test (tests/test_container_worker.py, run when
# `docker info` answers: the daemon is started by systemd, or by hand with `setsid /usr/sbin/dockerd`).
# qemu-utils: qemu-img, which makes the VM worker's throwaway overlay in tests/test_buildbot_config.py.
test_packages="$build_packages mariadb-server mariadb-plugin-rocksdb valgrind rpmlint lintian mmdebstrap
  piuparts docker.io tini zstd qemu-utils"

packages=$build_packages
[ "$what" = build ] || packages=$test_packages

# A machine may already hold a configuration file a package ships (a left-over
# /etc/logrotate.d/mariadb, say): keep it rather than stop at dpkg's prompt, and finish any
# package an earlier run left unconfigured.
keep_conffiles="-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold"
dpkg --force-confdef --force-confold --configure -a
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $keep_conffiles $packages
python3 -m pip install -q -r "$repo/requirements.txt"
if [ "$what" = build ]; then
  # Debian's Build-Depends of each MariaDB line the configurations build (pgo/build/builddeps.py), from
  # the deb-src entry of the line's Debian suite: without them CMake silently leaves plugins out
  # (`python3 -m pgo configure-check` proves it did not). The tests never build MariaDB: not for them.
  (cd "$repo" && python3 -m pgo build-deps)
fi
if [ "$what" = test ]; then
  # The linters .ci/run runs before the tests.
  python3 -m pip install -q -r "$repo/requirements/dev.txt"
fi
