"""The packages: the bintar, the debs (through Debian's own debian/rules, or the hand-written
split) and the rpms; their proof on a clean machine (piuparts, pgo prove); compare-debs."""
