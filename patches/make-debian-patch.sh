#!/bin/sh
# Writes the patch of Debian's packaging of a MariaDB line, debian-<major>.<minor>/0001-*.patch beside
# this script, against the Debian source tree given (dpkg-source -x of Debian's .dsc; only its
# VERSION, debian/rules and debian/patches/series are read): mariadb-<major>.<minor>/'s patch as the
# quilt patch debian/patches/pgo-cmake.patch, last in the series, and debian-rules-pgo.mk inserted
# into debian/rules before override_dh_auto_configure (DEB_BUILD_OPTIONS=pgo=<profile>|train). Run
# make-patch.sh first when the MariaDB patch changed. The same inputs make the same patch.
set -eu
source=${1:?usage: make-debian-patch.sh <Debian source tree of mariadb>}
here=$(cd "$(dirname "$0")" && pwd)
major=$(sed -n 's/^MYSQL_VERSION_MAJOR=//p' "$source/VERSION" 2>/dev/null || true)
minor=$(sed -n 's/^MYSQL_VERSION_MINOR=//p' "$source/VERSION" 2>/dev/null || true)
[ -n "$major" ] && [ -n "$minor" ] || {
  echo "make-debian-patch.sh: $source/VERSION names no MYSQL_VERSION_MAJOR and MYSQL_VERSION_MINOR" >&2; exit 1; }
upstream=$(ls "$here/mariadb-$major.$minor"/0001-*.patch 2>/dev/null || true)
[ -n "$upstream" ] || {
  echo "make-debian-patch.sh: no patch of MariaDB $major.$minor in $here/mariadb-$major.$minor: run make-patch.sh" >&2
  exit 1; }
for file in debian/rules debian/patches/series; do
  [ -f "$source/$file" ] || { echo "make-debian-patch.sh: $source has no $file: not a Debian source tree" >&2; exit 1; }
done
grep -q '^override_dh_auto_configure:' "$source/debian/rules" || {
  echo "make-debian-patch.sh: $source/debian/rules has no override_dh_auto_configure target" >&2; exit 1; }
grep -q 'CMAKEFLAGS' "$source/debian/rules" || {
  echo "make-debian-patch.sh: $source/debian/rules passes no \$(CMAKEFLAGS) to CMake" >&2; exit 1; }
series="$here/debian-$major.$minor"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

export GIT_AUTHOR_NAME="PGO pipeline authors" GIT_AUTHOR_EMAIL="pgo-pipeline@localhost"
export GIT_COMMITTER_NAME="$GIT_AUTHOR_NAME" GIT_COMMITTER_EMAIL="$GIT_AUTHOR_EMAIL"
export GIT_AUTHOR_DATE="2026-11-28T00:00:00+00:00" GIT_COMMITTER_DATE="2026-11-28T00:00:00+00:00"
mkdir -p "$work/debian/patches"
cp "$source/debian/rules" "$work/debian/rules"
cp "$source/debian/patches/series" "$work/debian/patches/series"
cd "$work"
git init -q
git add -A
git commit -q -m "Debian's debian/rules and patch series"

cp "$upstream" debian/patches/pgo-cmake.patch
echo pgo-cmake.patch >> debian/patches/series
awk -v snippet="$here/debian-rules-pgo.mk" '
  /^override_dh_auto_configure:/ && !done { while ((getline line < snippet) > 0) print line; print ""; done = 1 }
  { print }' debian/rules > debian/rules.new
mv debian/rules.new debian/rules
chmod 755 debian/rules
git add -A
git commit -q -F - <<'MESSAGE'
Build with profile-guided optimisation: DEB_BUILD_OPTIONS=pgo=<profile>

debian/patches/pgo-cmake.patch gives MariaDB's build cmake/pgo.cmake and its
training (support-files/pgo/profile_load). With it, debian/rules passes

  DEB_BUILD_OPTIONS=pgo=<profile>   -DPGO_PROFILE=<profile>: a profile a PGO
                                    release pipeline published (its archive
                                    entry, or profile.tar.xz with manifest.json
                                    and sha256sums.txt beside it), checked
                                    against this build's GCC, version and flags
  DEB_BUILD_OPTIONS=pgo=train       -DWITH_PGO=ON: an instrumented build, the
                                    training, then this tree with the profile

Without the option nothing changes. The version comment then says
"PGO build, profile <id>"; a build whose hot code got too little of the
profile fails.
MESSAGE
mkdir -p "$series"
rm -f "$series"/0001-*.patch
git format-patch -q --zero-commit --no-signature -1 -o "$series"
ls "$series"/0001-*.patch
