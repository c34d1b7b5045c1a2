# Profile-guided optimisation with GCC (cmake/pgo.cmake, added by debian/patches/pgo-cmake.patch):
# DEB_BUILD_OPTIONS=pgo=<profile> builds with a profile a PGO release pipeline published: an
# archive entry folder, or its profile.tar.xz with manifest.json and sha256sums.txt beside it. The
# configure checks its checksums and refuses, in one line, a profile of another GCC version,
# another upstream version, other flags or another build type. The version comment says "PGO
# build, profile <id>", and the build ends saying how much of the profile applied: it fails when
# too little did (cmake/pgo.cmake PGO_MIN_HOT_COVERAGE), so no package says PGO without it.
# pgo=train trains one in this build instead: an instrumented build, profile_load against it,
# then this tree compiled with the profile.
PGO_OPTION := $(patsubst pgo=%,%,$(filter pgo=%,$(DEB_BUILD_OPTIONS)))
ifeq ($(PGO_OPTION),train)
    CMAKEFLAGS += -DWITH_PGO=ON
else ifneq ($(PGO_OPTION),)
    CMAKEFLAGS += -DPGO_PROFILE=$(PGO_OPTION)
endif
