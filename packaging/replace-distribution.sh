#!/bin/sh
# `pgo prove --replace-distribution`, run inside its throw-away chroot (pgo/packaging/formats/deb.py in_chroot): a
# system with the distribution's packages installed first, then ours installed over them with apt, as a
# user upgrades a Debian server. Nothing may be removed: a package of the user's that ours would take away
# (a plugin or tool tied to the distribution's exact server version that our set lacks) refuses the set.
#
#   replace-distribution.sh DEBS_FOLDER
#   PGO_NAMES  the set's package names: the distribution's packages of these names are installed first
#   PGO_ALSO   packages users have beside them (the recipe's distribution_packages, an older set's names)
#
# Lines for pgo/packaging/proving.py start with "pgo-replace: "; "pgo-replace: refused: ..." is the one-line reason.
set -eu
debs=$1
apt_get() { DEBIAN_FRONTEND=noninteractive apt-get -y -q -o Dpkg::Use-Pty=0 "$@"; }

# What the chroot's archives serve of those names (a virtual or unknown name has no version to show).
served=""
for name in $PGO_NAMES $PGO_ALSO; do
    case " $served " in *" $name "*) continue ;; esac
    if apt-cache show --no-all-versions "$name" >/dev/null 2>&1; then
        served="$served $name"
    fi
done
if [ -z "$served" ]; then
    echo "pgo-replace: refused: the distribution serves none of the packages to replace: $PGO_NAMES $PGO_ALSO"
    exit 1
fi
# shellcheck disable=SC2086 # one word a package
apt_get install $served
# shellcheck disable=SC2016,SC2086 # dpkg-query's own ${...} fields
echo "pgo-replace: installed first:" $(dpkg-query -W -f '${Package}=${Version}\n' $served | LC_ALL=C sort)

# apt's plan for ours, before anything happens: every package it would remove is named.
removed=$(apt_get --simulate --allow-downgrades install "$debs"/*.deb | sed -n 's/^Remv \([^ ]*\).*/\1/p')
if [ -n "$removed" ]; then
    echo "pgo-replace: refused: installing ours would remove" $removed
    exit 1
fi
# --allow-downgrades: the archive may serve a newer upstream release than the one built (a security
# update); --no-remove: apt aborts rather than take anything away, whatever the simulation said.
apt_get --allow-downgrades --no-remove install "$debs"/*.deb
# shellcheck disable=SC2016,SC2086
echo "pgo-replace: after ours, nothing removed:" $(dpkg-query -W -f '${Package}=${Version}\n' $served | LC_ALL=C sort)
