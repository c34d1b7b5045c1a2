#!/bin/sh
# strip, except a binary BOLT rewrote (pgo/build/bolt.py): binutils' strip breaks BOLT's layout (the
# stripped fixture crashes at start; llvm-project issue 89336), so it ships as BOLT wrote it.
# rpmbuild's brp-strip scripts run this as %__strip (pgo/packaging/formats/rpm.py); the file is the last argument.
for file; do :; done
if readelf -S -W "$file" 2>/dev/null | grep -q '[.]note[.]bolt_info'; then
  exit 0
fi
# A program or library linked with -Wl,--emit-relocs (every link of a `bolt = true` build) keeps its
# static relocations, and strip keeps every symbol they name (rpmlint: unstripped-binary-or-object):
# they go first, in a pass of their own, as pgo/packaging/debpackages.py strips a deb's. Never from an object
# file or a static archive, whose relocations are what a later link needs.
case $(readelf -h "$file" 2>/dev/null | sed -n 's/^ *Type: *\([A-Z]*\).*/\1/p') in
  EXEC|DYN) strip --remove-relocations='*' "$file" || exit ;;
esac
exec strip "$@"
