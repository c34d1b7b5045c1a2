#!/bin/sh
# Install what this repository needs on Debian 12, as root.
#   tools/install-deps.sh build   a release: the MariaDB PGO build (compilers, MariaDB's build
#                                 dependencies), its packages and the benchmark
#   tools/install-deps.sh test    also what the tests, the package proofs and the linters use
set -eu
what=${1:-build}

# checkpolicy and semodule-utils: MariaDB's -DRPM build compiles its SELinux policy module (and
# the fixture's, with checkmodule, for the tests of the rpm tree).
# bolt-19 and libbolt-19-dev (its instrumentation runtime): the bolt phase of a configuration with
# `bolt = true` (pgo/bolt.py); LLVM 19's BOLT, the newest in bookworm's main archive.
# debhelper, dh-exec, po-debconf and fakeroot: the debs of a configuration with `debian_rules = true`
# come from the Debian source package's own debian/rules (pgo/debrules.py; Debian's mariadb rules
# use dh-exec in its .install files and po-debconf for its debconf templates).
build_packages="gcc g++ cmake ninja-build bison pkg-config git
  libncurses-dev libssl-dev zlib1g-dev libfmt-dev libpcre2-dev libaio-dev liburing-dev
  libpam0g-dev libsystemd-dev libxml2-dev libcurl4-openssl-dev
  mariadb-client libmariadb-dev sysbench
  dpkg-dev binutils rpm cpio checkpolicy semodule-utils
  debhelper dh-exec po-debconf fakeroot
  bolt-19 libbolt-19-dev"
# A real server for the tests, the benchmark's callgrind, and the package proofs
# (rpmlint, lintian, a Debian chroot for the .deb, Debian's piuparts for `pgo prove --piuparts`).
# mariadb-plugin-rocksdb: ha_rocksdb.so, which profile_load's rocksdb cells load into that server.
# docker.io, tini and zstd: the container worker's test (tests/test_container_worker.py, run when
# `docker info` answers: the daemon is started by systemd, or by hand with `setsid /usr/sbin/dockerd`).
test_packages="$build_packages mariadb-server mariadb-plugin-rocksdb valgrind rpmlint lintian mmdebstrap
  piuparts docker.io tini zstd"

case "$what" in
  build) packages=$build_packages ;;
  test) packages=$test_packages ;;
  *) echo "usage: $0 build|test" >&2; exit 2 ;;
esac

export DEBIAN_FRONTEND=noninteractive
# A machine may already hold a configuration file a package ships (a left-over
# /etc/logrotate.d/mariadb, say): keep it rather than stop at dpkg's prompt, and finish any
# package an earlier run left unconfigured.
keep_conffiles="-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold"
apt-get update -q
dpkg --force-confdef --force-confold --configure -a
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $keep_conffiles $packages
python3 -m pip install -q -r "$(dirname "$0")/../requirements.txt"
if [ "$what" = build ]; then
  # Debian's Build-Depends of each MariaDB line the configurations build (pgo/builddeps.py), from
  # the deb-src entry of the line's Debian suite: without them CMake silently leaves plugins out
  # (`python3 -m pgo configure-check` proves it did not). The tests never build MariaDB: not for them.
  (cd "$(dirname "$0")/.." && python3 -m pgo build-deps)
fi
if [ "$what" = test ]; then
  # The linters .ci/run runs before the tests.
  python3 -m pip install -q -r "$(dirname "$0")/../requirements/dev.txt"
fi
