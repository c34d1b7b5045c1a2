#!/bin/sh
# Run the fixture from a package: `fixture.sh tree BASEDIR` (an unpacked bintar
# or rpm payload) or `fixture.sh system` (installed by the .deb).
set -eu
case "$1" in
  tree) fixture="$2/bin/fixture" ;;
  system) fixture=fixture ;;
  *) echo "usage: fixture.sh tree BASEDIR | system" >&2; exit 2 ;;
esac
"$fixture" digest "SELECT 1"
version=$("$fixture" --version)
echo "version_comment: ${version#*(}" | sed 's/)$//'
