#!/bin/sh
# Writes the patch of a MariaDB line, mariadb-<major>.<minor>/0001-PGO-*.patch beside this script,
# against the MariaDB source tree given (only its top CMakeLists.txt and VERSION are read): this
# repository's cmake/pgo.cmake as MariaDB's cmake/pgo.cmake, profile_load/ as
# support-files/pgo/profile_load/, and pgo-training.cmake inserted into the top CMakeLists.txt
# after INCLUDE(mysql_version). The same inputs make the same patch (fixed author and date, no
# commit id, no signature).
set -eu
source=${1:?usage: make-patch.sh <MariaDB source tree>}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
major=$(sed -n 's/^MYSQL_VERSION_MAJOR=//p' "$source/VERSION" 2>/dev/null || true)
minor=$(sed -n 's/^MYSQL_VERSION_MINOR=//p' "$source/VERSION" 2>/dev/null || true)
[ -n "$major" ] && [ -n "$minor" ] || {
  echo "make-patch.sh: $source/VERSION names no MYSQL_VERSION_MAJOR and MYSQL_VERSION_MINOR" >&2; exit 1; }
series="$here/mariadb-$major.$minor"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

grep -qx 'INCLUDE(mysql_version)' "$source/CMakeLists.txt" || {
  echo "make-patch.sh: $source/CMakeLists.txt has no line INCLUDE(mysql_version)" >&2; exit 1; }
cp "$source/CMakeLists.txt" "$work/"
export GIT_AUTHOR_NAME="PGO pipeline authors" GIT_AUTHOR_EMAIL="pgo-pipeline@localhost"
export GIT_COMMITTER_NAME="$GIT_AUTHOR_NAME" GIT_COMMITTER_EMAIL="$GIT_AUTHOR_EMAIL"
export GIT_AUTHOR_DATE="2026-11-28T00:00:00+00:00" GIT_COMMITTER_DATE="2026-11-28T00:00:00+00:00"
cd "$work"
git init -q
git add CMakeLists.txt
git commit -q -m "MariaDB's top CMakeLists.txt"

mkdir -p cmake support-files/pgo/profile_load
cp "$repo/cmake/pgo.cmake" cmake/pgo.cmake
cp -R "$repo/profile_load/CMakeLists.txt" "$repo/profile_load/README.md" "$repo/profile_load/src" \
  support-files/pgo/profile_load/
sed -i "/^INCLUDE(mysql_version)\$/r $here/pgo-training.cmake" CMakeLists.txt
git add -A
git commit -q -F - <<'MESSAGE'
PGO: cmake -DWITH_PGO=ON trains and builds with the profile in one build

cmake/pgo.cmake gives the build GCC's profile-guided optimisation:

  cmake -DWITH_PGO=ON . && cmake --build .
    an instrumented build of this tree in a tree of its own (pgo/instrumented),
    installed for the training, trained with support-files/pgo/profile_load,
    checked (every hot folder's objects ran), then this tree compiled with
    -fprofile-use; a later build trains again only when the instrumented build
    changed, and recompiles only when the profile changed.

  cmake -DPGO_PROFILE=<profile> . && cmake --build .
    a profile published by a PGO release pipeline (profile.tar.xz with its
    manifest.json and sha256sums.txt), checked against this build's GCC
    version, source version, flags and build type, without training.

Both end saying how much of the profile applied to the hot objects.
Only GCC 10 or later; another compiler is refused.
MESSAGE
mkdir -p "$series"
rm -f "$series"/0001-*.patch
git format-patch -q --zero-commit --no-signature -1 -o "$series"
ls "$series"/0001-*.patch
