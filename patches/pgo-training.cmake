
# Profile-guided optimisation with GCC (cmake/pgo.cmake). -DWITH_PGO=ON: one build makes an
# instrumented build of this tree (installed under ${PGO_INSTRUMENTED_PREFIX}), trains it with
# profile_load (support-files/pgo/profile_load: the matrix of engines, binlog formats and client
# APIs, then a steady state), checks that the hot folders got a profile, and compiles this tree
# with it. -DPGO_PROFILE=<profile>: builds with a published profile instead of training.
INCLUDE(pgo)
PGO_TRAINING(PRODUCT mariadb VERSION "${MAJOR_VERSION}.${MINOR_VERSION}.${PATCH_VERSION}"
  # What the training must reach; a published profile's coverage is counted over them too.
  HOT_DIRS sql storage/innobase mysys strings libmariadb
  # The training runs the installed server, its bootstrap and its client library.
  INSTALL
  # The instrumented build leaves out what the training never runs: these change the compile
  # command of no object of sql/, storage/innobase/, storage/perfschema/, mysys/ or strings/ (S3
  # stays: it changes Aria's), so the profile fits the whole build. The plugins left out get no
  # profile and are compiled as without PGO.
  CMAKE_ARGS -DWITH_EMBEDDED_SERVER=OFF -DWITH_UNIT_TESTS=OFF -DPLUGIN_MROONGA=NO -DPLUGIN_SPIDER=NO
             -DPLUGIN_CONNECT=NO -DPLUGIN_OQGRAPH=NO -DPLUGIN_SPHINX=NO -DWITH_MARIABACKUP=OFF
  # BUILD_CONFIG sets the flags of every object (mysql_release), as the build type does.
  MATCH_OPTIONS CMAKE_BUILD_TYPE BUILD_CONFIG
  # profile_load is built against the instrumented client library, with this compiler, whose
  # libgcov writes its counters; configuring it runs the instrumented mariadb_config, no part of
  # the workload: its counters go to setup-counters (GCOV_PREFIX), as the bootstrap's do
  # (profile_load --setup-counters).
  COMMAND sh -c "GCOV_PREFIX=\"$0\" exec \"$@\"" "${PGO_TRAINING_WORK_DIR}/setup-counters"
          "${CMAKE_COMMAND}" -S "${CMAKE_SOURCE_DIR}/support-files/pgo/profile_load"
          -B "${PGO_WORK_DIR}/profile_load" "-DMARIADB_ROOT=${PGO_INSTRUMENTED_PREFIX}"
          "-DCMAKE_C_COMPILER=${CMAKE_C_COMPILER}"
          "-DCMAKE_EXE_LINKER_FLAGS=-fprofile-generate=${PGO_TRAINING_DIR}"
  COMMAND "${CMAKE_COMMAND}" --build "${PGO_WORK_DIR}/profile_load"
  COMMAND "${PGO_WORK_DIR}/profile_load/profile_load" --basedir "${PGO_INSTRUMENTED_PREFIX}"
          --workdir "${PGO_TRAINING_WORK_DIR}/profile_load"
          --setup-counters "${PGO_TRAINING_WORK_DIR}/setup-counters" --report "${PGO_WORK_DIR}/train-report.json")

# The version comment (SELECT @@version_comment) says what the build is, as the PGO pipeline's own
# builds do: "PGO build, profile <id>" with a published profile, "PGO build, trained in this build"
# with WITH_PGO; a build whose profile did not apply fails before it is finished (cmake/pgo.cmake).
IF(PGO_BUILD_LABEL)
  SET(COMPILATION_COMMENT "${COMPILATION_COMMENT}, ${PGO_BUILD_LABEL}")
ENDIF()
