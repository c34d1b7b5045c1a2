# Copyright (c) 2026, the PGO pipeline authors
#
# This program is free software; you can redistribute it and/or modify
# it under the terms of the GNU General Public License as published by
# the Free Software Foundation; version 2 of the License.
#
# This program is distributed in the hope that it will be useful,
# but WITHOUT ANY WARRANTY; without even the implied warranty of
# MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE.  See the
# GNU General Public License for more details.
#
# You should have received a copy of the GNU General Public License
# along with this program; if not, write to the Free Software
# Foundation, Inc., 51 Franklin St, Fifth Floor, Boston, MA  02110-1335 USA

# Profile-guided optimisation with GCC, from one configure and one build.
#
#   cmake -DWITH_PGO=ON <source> && cmake --build .
#     builds what the training needs with -fprofile-generate, in a build tree of its own below
#     this one (pgo/instrumented), runs the project's training against it, checks that every hot
#     directory got a profile, then compiles this tree with -fprofile-use. Every compile of this
#     tree waits for the training. A later build trains again when the instrumented build
#     changed, and recompiles this tree when the profile changed.
#
#   cmake -DPGO_PROFILE=<profile> <source> && cmake --build .
#     builds with a profile the PGO release pipeline published, without training: an archive
#     entry folder, or its profile.tar.xz with manifest.json and sha256sums.txt beside it. The
#     configure checks the checksums, and refuses a profile of another product or version, of
#     another GCC version, or made with other flags (see PGO_CHECK_PUBLISHED below for what is
#     compared). -DPGO_PROFILE_ACCEPT_STALE=ON takes the profile of another version of the same
#     line (MAJOR.MINOR): GCC then uses it for every function that did not change.
#
#   Either way the build ends with what applied: the hot objects compiled with their .gcda, and
#   of those, the ones whose code GCC laid out as hot (.text.hot), in one line and in
#   pgo/report.json. A build in which fewer than PGO_MIN_HOT_COVERAGE percent of the hot objects
#   (30, the pipeline's default) found their .gcda fails. PGO_TRAINING sets PGO_BUILD_LABEL ("PGO
#   build, profile <id>", "PGO build, trained in this build") for the project's version comment.
#   A published profile applies whole only to a source configured from the folder it was trained
#   in (its manifest's source_dir; the configure warns otherwise): GCC names the profile of a
#   function that is not public by its source's path too.
#
# The project includes this file from its top CMakeLists.txt, after PROJECT(), and names its
# training once:
#
#   PGO_TRAINING(PRODUCT <name> VERSION <MAJOR.MINOR.PATCH>
#     HOT_DIRS <object folders, relative to the build tree, that the training must reach>...
#     [TARGETS <the targets the training runs>... | INSTALL]
#     [CMAKE_ARGS <options of the instrumented build only>...]
#     [MATCH_OPTIONS <cache variables a published profile's build must have had the same>...]
#     COMMAND <program> <arguments>... [COMMAND ...])
#
# TARGETS builds only those targets of the instrumented build, whose files are then under
# ${PGO_INSTRUMENTED_BINARY_DIR}; INSTALL builds all of it and installs it under
# ${PGO_INSTRUMENTED_PREFIX} (with DESTDIR, so that absolute destinations stay inside it too).
# The commands run one after the other in ${PGO_WORK_DIR}; the build fails if one fails. Each
# training starts with ${PGO_TRAINING_WORK_DIR} empty, for what the commands write (a datadir). A
# program the training builds itself against the instrumented libraries links with
# -fprofile-generate=${PGO_TRAINING_DIR}, where the instrumented build writes its counters.
# MATCH_OPTIONS defaults to CMAKE_BUILD_TYPE.
#
# Without WITH_PGO and PGO_PROFILE this file changes nothing. With them it needs GCC 10 or
# later (-fprofile-prefix-path, -fprofile-partial-training) and CMake 3.19 or later.
#
# Each refusal is one line (it begins with "PGO: ") and stops the configure or the build.

# The policies this file is written for (IN_LIST, quoted arguments never taken for variables),
# whatever the including project's are: INCLUDE() gives this file a policy scope of its own, and
# its functions keep the policies they were defined with. (An older CMake only gets as far as
# refusing WITH_PGO and PGO_PROFILE below.)
IF(NOT CMAKE_VERSION VERSION_LESS 3.12)
  CMAKE_POLICY(VERSION 3.12...3.19)
ENDIF()

SET(PGO_MODULE_FILE "${CMAKE_CURRENT_LIST_FILE}")
# How a published profile's manifest writes the paths in its flags (pgo/toolchain.py
# config_flags): the profile folder, the build tree and the source tree.
SET(PGO_PLACEHOLDER_PROFILE_DIR "PROFILE_DIR")
SET(PGO_PLACEHOLDER_BUILD_DIR "BUILD_DIR")
SET(PGO_PLACEHOLDER_SOURCE_DIR "SOURCE_DIR")
# What a pipeline manifest is, in the version this module reads (pgo/archive_model.py).
SET(PGO_MANIFEST_FORMAT 1)
# The environment GCC's output depends on without it showing in the flags (pgo/toolchain.py
# BUILD_ENVIRONMENT), compared with a published profile's.
SET(PGO_BUILD_ENVIRONMENT GCC_EXEC_PREFIX COMPILER_PATH CPATH C_INCLUDE_PATH CPLUS_INCLUDE_PATH
    LIBRARY_PATH ASMFLAGS)

# One error, one line (its parts joined as they are): CMake rewraps a message at 70 columns
# unless its line begins with a space, which marks it as preformatted.
FUNCTION(PGO_FAIL)
  SET(message "")
  MATH(EXPR last "${ARGC} - 1")
  FOREACH(index RANGE ${last})
    STRING(APPEND message "${ARGV${index}}")
  ENDFOREACH()
  MESSAGE(FATAL_ERROR " PGO: ${message}")
ENDFUNCTION()

# A bracket argument that holds value exactly: the generated scripts below carry paths and
# command lines, which may hold quotes, semicolons and backslashes.
FUNCTION(PGO_BRACKET value out)
  SET(eq "=")
  WHILE(1)
    STRING(FIND "${value}]" "]${eq}]" at)
    IF("${at}" EQUAL -1)
      BREAK()
    ENDIF()
    STRING(APPEND eq "=")
  ENDWHILE()
  SET(${out} "[${eq}[${value}]${eq}]" PARENT_SCOPE)
ENDFUNCTION()

# SET(name <items>) as a line of CMake: a list keeps its items apart.
FUNCTION(PGO_SET_LINE name out)
  SET(line "SET(${name}")
  FOREACH(item IN LISTS ARGN)
    PGO_BRACKET("${item}" quoted)
    STRING(APPEND line " ${quoted}")
  ENDFOREACH()
  SET(${out} "${line})\n" PARENT_SCOPE)
ENDFUNCTION()

# Write a file only when its content changes: its time stamp is what the build's rules compare.
FUNCTION(PGO_WRITE_IF_CHANGED file content)
  IF(EXISTS "${file}")
    FILE(READ "${file}" old)
    IF("${old}" STREQUAL "${content}")
      RETURN()
    ENDIF()
  ENDIF()
  FILE(WRITE "${file}.next" "${content}")
  FILE(RENAME "${file}.next" "${file}")
ENDFUNCTION()

# 'CMakeFiles/hot.dir/src/hot.c.o' -> 'CMakeFiles#hot.dir#src#hot.c.gcda': GCC names the
# .gcda of an object after its path, relative to -fprofile-prefix-path, with '/' as '#'.
FUNCTION(PGO_GCDA_NAME object out)
  STRING(REGEX REPLACE "\\.o$" "" name "${object}")
  STRING(REPLACE "/" "#" name "${name}")
  SET(${out} "${name}.gcda" PARENT_SCOPE)
ENDFUNCTION()

# The objects of a build tree in a hot folder, relative to the tree. The instrumented tree and
# this module's work folder are not this build's objects.
FUNCTION(PGO_OBJECTS_IN tree dir out)
  FILE(GLOB_RECURSE objects RELATIVE "${tree}" "${tree}/${dir}/*.o")
  LIST(FILTER objects EXCLUDE REGEX "^pgo/")
  SET(${out} ${objects} PARENT_SCOPE)
ENDFUNCTION()

# The .gcda files of a profile folder that hold counters, by name.
FUNCTION(PGO_GCDA_IN dir out)
  FILE(GLOB names RELATIVE "${dir}" "${dir}/*.gcda")
  SET(kept)
  FOREACH(name IN LISTS names)
    FILE(SIZE "${dir}/${name}" size)
    IF(size GREATER 0)
      LIST(APPEND kept "${name}")
    ENDIF()
  ENDFOREACH()
  SET(${out} ${kept} PARENT_SCOPE)
ENDFUNCTION()

# The .gcda files of a profile folder whose objects ran: libgcov writes a .gcda for every object
# of a program, the ones whose code never ran too, with counters that are all zero. gcov-dump of
# GCC 12 and later marks those "(all zero)"; without such a gcov-dump, every .gcda counts.
FUNCTION(PGO_RAN dir gcda out how_out)
  IF(NOT PGO_GCOV_DUMP)
    SET(${out} ${gcda} PARENT_SCOPE)
    SET(${how_out} "no gcov-dump of GCC 12 or later: objects counted by their .gcda" PARENT_SCOPE)
    RETURN()
  ENDIF()
  SET(ran)
  SET(batch)
  LIST(LENGTH gcda left)
  FOREACH(name IN LISTS gcda)
    LIST(APPEND batch "${dir}/${name}")
    MATH(EXPR left "${left} - 1")
    LIST(LENGTH batch size)
    # A few hundred at a time: the command line stays short.
    IF(size LESS 200 AND left GREATER 0)
      CONTINUE()
    ENDIF()
    EXECUTE_PROCESS(COMMAND "${PGO_GCOV_DUMP}" ${batch} OUTPUT_VARIABLE dump ERROR_VARIABLE errors
                    RESULT_VARIABLE status)
    IF(NOT "${status}" EQUAL 0)
      STRING(REGEX REPLACE "\n.*" "" errors "${errors}")
      PGO_FAIL("${PGO_GCOV_DUMP} could not read the training's .gcda files (${status}): ${errors}")
    ENDIF()
    STRING(REGEX MATCHALL "[^\n]*\\.gcda: +01a10000: +[0-9]+:COUNTERS arcs [0-9]+ counts\n" counted "${dump}")
    FOREACH(line IN LISTS counted)
      STRING(REGEX REPLACE "^.*/([^/]*\\.gcda):.*$" "\\1" name "${line}")
      LIST(APPEND ran "${name}")
    ENDFOREACH()
    SET(batch)
  ENDFOREACH()
  IF(ran)
    LIST(REMOVE_DUPLICATES ran)
  ENDIF()
  SET(${out} ${ran} PARENT_SCOPE)
  SET(${how_out} "counters read with ${PGO_GCOV_DUMP}" PARENT_SCOPE)
ENDFUNCTION()

# ---------------------------------------------------------------------------------------------
# Build steps: this file run as a script (cmake -DPGO_STEP=<step> -DPGO_SETTINGS=<file> -P).
# ---------------------------------------------------------------------------------------------

# After the instrumented build: an identity of what it compiled and linked (each object's, program's and
# library's path, size and time), written only when it changed, so that the training runs again only
# then. Not the text files a build writes again each time (MariaDB's Docs/INFO_BIN says when it was
# built), nor the installed copies: an install of the same programs copies those again when it edited
# their RPATH, and they are what the build tree linked.
FUNCTION(PGO_STEP_IDENTIFY)
  FILE(GLOB_RECURSE files LIST_DIRECTORIES false RELATIVE "${PGO_INSTRUMENTED_BINARY_DIR}"
       "${PGO_INSTRUMENTED_BINARY_DIR}/*")
  SET(objects ${files})
  LIST(FILTER objects INCLUDE REGEX "(^|/)CMakeFiles/.*\\.o$")
  LIST(FILTER files EXCLUDE REGEX "(^|/)CMakeFiles/")
  SET(linked)
  FOREACH(file IN LISTS files)
    # A program or a shared library (ELF), or a static library (ar): the rest is no code.
    FILE(READ "${PGO_INSTRUMENTED_BINARY_DIR}/${file}" magic LIMIT 4 HEX)
    IF(magic MATCHES "^(7f454c46|213c6172)$")
      LIST(APPEND linked "${file}")
    ENDIF()
  ENDFOREACH()
  SET(lines "")
  FOREACH(file IN LISTS objects linked)
    FILE(SIZE "${PGO_INSTRUMENTED_BINARY_DIR}/${file}" size)
    FILE(TIMESTAMP "${PGO_INSTRUMENTED_BINARY_DIR}/${file}" time "%s.%f")
    STRING(APPEND lines "${file} ${size} ${time}\n")
  ENDFOREACH()
  STRING(SHA256 id "${lines}")
  PGO_WRITE_IF_CHANGED("${PGO_WORK_DIR}/instrumented.id" "${id}\n")
ENDFUNCTION()

# The training, its check, and the profile this tree compiles with.
FUNCTION(PGO_STEP_TRAIN)
  SET(training "${PGO_TRAINING_DIR}")
  # libgcov adds a run's counters to the .gcda it finds: an earlier training's would count twice. A
  # training after another (the instrumented build changed) starts as the first did.
  FILE(REMOVE_RECURSE "${training}" "${PGO_TRAINING_WORK_DIR}")
  FILE(MAKE_DIRECTORY "${training}" "${PGO_TRAINING_WORK_DIR}")
  FOREACH(number IN LISTS PGO_COMMANDS)
    SET(command ${PGO_COMMAND_${number}})
    LIST(JOIN command " " shown)
    MESSAGE(STATUS "PGO: training: ${shown}")
    # GCOV_PREFIX would write the counters elsewhere than -fprofile-generate says: a command
    # that wants that (to keep a setup step's counters out of the profile) sets it itself.
    EXECUTE_PROCESS(COMMAND "${CMAKE_COMMAND}" -E env --unset=GCOV_PREFIX --unset=GCOV_PREFIX_STRIP
                            ${command}
                    WORKING_DIRECTORY "${PGO_WORK_DIR}" RESULT_VARIABLE status)
    IF(NOT "${status}" EQUAL 0)
      PGO_FAIL("the training command '${shown}' failed (${status}): no profile was made")
    ENDIF()
  ENDFOREACH()

  PGO_GCDA_IN("${training}" gcda)
  PGO_RAN("${training}" "${gcda}" ran how)
  SET(summary "")
  FOREACH(dir IN LISTS PGO_HOT_DIRS)
    PGO_OBJECTS_IN("${PGO_INSTRUMENTED_BINARY_DIR}" "${dir}" objects)
    LIST(LENGTH objects total)
    IF("${total}" EQUAL 0)
      PGO_FAIL("the instrumented build has no objects in the hot folder ${dir}: PGO_TRAINING names a folder "
               "it does not build (TARGETS, HOT_DIRS)")
    ENDIF()
    SET(reached 0)
    FOREACH(object IN LISTS objects)
      PGO_GCDA_NAME("${object}" name)
      IF(name IN_LIST ran)
        MATH(EXPR reached "${reached} + 1")
      ENDIF()
    ENDFOREACH()
    IF("${reached}" EQUAL 0)
      PGO_FAIL("the training left no profile for the hot folder ${dir} (0 of its ${total} objects ran): it "
               "did not run the instrumented build's code there")
    ENDIF()
    STRING(APPEND summary ", ${dir} ${reached} of ${total} objects ran")
  ENDFOREACH()

  # The profile: the .gcda files named relative to the build tree (objects outside it, such as
  # a training program built elsewhere, have absolute names, which begin with '#').
  SET(lines "")
  SET(kept)
  FOREACH(name IN LISTS gcda)
    IF(NOT name MATCHES "^#")
      FILE(SHA256 "${training}/${name}" sum)
      STRING(APPEND lines "${name} ${sum}\n")
      LIST(APPEND kept "${name}")
    ENDIF()
  ENDFOREACH()
  STRING(SHA256 id "${lines}")
  STRING(SUBSTRING "${id}" 0 12 id)
  LIST(LENGTH kept count)
  SET(stamp "${PGO_WORK_DIR}/profile.id")
  SET(old "")
  IF(EXISTS "${stamp}")
    FILE(STRINGS "${stamp}" old LIMIT_COUNT 1)
  ENDIF()
  IF("${old}" STREQUAL "${id}" AND IS_DIRECTORY "${PGO_WORK_DIR}/profile")
    MESSAGE(STATUS "PGO: trained profile ${id}: ${count} .gcda files${summary} (${how}); unchanged, nothing "
                   "to recompile")
  ELSE()
    # A new profile replaces the old as a whole, then the stamp every object depends on.
    FILE(REMOVE_RECURSE "${PGO_WORK_DIR}/profile.next")
    FILE(MAKE_DIRECTORY "${PGO_WORK_DIR}/profile.next")
    FOREACH(name IN LISTS kept)
      FILE(COPY "${training}/${name}" DESTINATION "${PGO_WORK_DIR}/profile.next")
    ENDFOREACH()
    FILE(REMOVE_RECURSE "${PGO_WORK_DIR}/profile")
    FILE(RENAME "${PGO_WORK_DIR}/profile.next" "${PGO_WORK_DIR}/profile")
    FILE(WRITE "${stamp}" "${id}\n")
    MESSAGE(STATUS "PGO: trained profile ${id}: ${count} .gcda files${summary} (${how})")
  ENDIF()
  FILE(TOUCH "${PGO_WORK_DIR}/trained.stamp")
ENDFUNCTION()

# After this tree's build: how much of the profile applied.
FUNCTION(PGO_STEP_REPORT)
  SET(profile "${PGO_WORK_DIR}/profile")
  PGO_GCDA_IN("${profile}" gcda)
  SET(label "${PGO_LABEL}")
  IF(EXISTS "${PGO_WORK_DIR}/profile.id" AND "${label}" STREQUAL "")
    FILE(STRINGS "${PGO_WORK_DIR}/profile.id" id LIMIT_COUNT 1)
    SET(label "trained profile ${id}")
  ENDIF()
  SET(hot)
  FOREACH(dir IN LISTS PGO_HOT_DIRS)
    PGO_OBJECTS_IN("${PGO_BUILD_DIR}" "${dir}" objects)
    LIST(APPEND hot ${objects})
  ENDFOREACH()
  LIST(REMOVE_DUPLICATES hot)
  SET(covered)
  SET(used_gcda)
  FOREACH(object IN LISTS hot)
    PGO_GCDA_NAME("${object}" name)
    IF(name IN_LIST gcda)
      LIST(APPEND covered "${object}")
      LIST(APPEND used_gcda "${name}")
    ENDIF()
  ENDFOREACH()
  LIST(LENGTH hot total)
  LIST(LENGTH covered with)

  # The code tells that a compile read its profile: GCC lays out the functions the profile
  # shows hot in .text.hot (-freorder-functions, on at -O2); without a profile it does so only
  # for __attribute__((hot)).
  SET(hot_text)
  IF(PGO_READELF AND covered)
    SET(paths)
    FOREACH(object IN LISTS covered)
      LIST(APPEND paths "${PGO_BUILD_DIR}/${object}")
    ENDFOREACH()
    EXECUTE_PROCESS(COMMAND "${PGO_READELF}" -S -W ${paths} OUTPUT_VARIABLE sections ERROR_QUIET)
    # readelf heads each object's sections with "File: <path>" when it reads several; a section
    # line is "[Nr] Name Type Address Off Size ...".
    STRING(REGEX MATCHALL "File: [^\n]*|\\.text\\.hot[^ \n]* +PROGBITS +[0-9a-f]+ +[0-9a-f]+ +[0-9a-f]+"
           found "${sections}")
    LIST(GET paths 0 current)
    FOREACH(item IN LISTS found)
      IF(item MATCHES "^File: (.*)$")
        SET(current "${CMAKE_MATCH_1}")
      ELSEIF(item MATCHES " [0-9a-f]*[1-9a-f][0-9a-f]*$")
        LIST(APPEND hot_text "${current}")
      ENDIF()
    ENDFOREACH()
    LIST(REMOVE_DUPLICATES hot_text)
  ENDIF()
  LIST(LENGTH hot_text laid_out)

  LIST(LENGTH gcda profile_files)
  LIST(LENGTH used_gcda used)
  MATH(EXPR unused "${profile_files} - ${used}")
  IF(total GREATER 0)
    MATH(EXPR percent "100 * ${with} / ${total}")
  ELSE()
    SET(percent 0)
  ENDIF()
  STRING(CONCAT line "${label}: ${with} of ${total} hot objects (${percent}%) compiled with their .gcda, "
                     "${laid_out} of them with code laid out hot (.text.hot); ${unused} of the profile's "
                     "${profile_files} .gcda files are not of a hot object")
  STRING(REPLACE "\\" "\\\\" quoted "${label}")
  STRING(REPLACE "\"" "\\\"" quoted "${quoted}")
  SET(json "{}")
  STRING(JSON json SET "${json}" profile "\"${quoted}\"")
  STRING(JSON json SET "${json}" hot_objects "${total}")
  STRING(JSON json SET "${json}" with_profile "${with}")
  STRING(JSON json SET "${json}" laid_out_hot "${laid_out}")
  STRING(JSON json SET "${json}" profile_gcda_files "${profile_files}")
  STRING(JSON json SET "${json}" min_hot_coverage "${PGO_MIN_HOT_COVERAGE}")
  STRING(JSON json SET "${json}" gcc "\"${PGO_GCC_VERSION}\"")
  FILE(WRITE "${PGO_WORK_DIR}/report.json" "${json}\n")
  IF(total GREATER 0 AND "${with}" EQUAL 0)
    PGO_FAIL("${line}: this is no PGO build (the profile's objects are not this build's)")
  ENDIF()
  IF(total GREATER 0 AND percent LESS PGO_MIN_HOT_COVERAGE)
    PGO_FAIL("${line}: fewer than PGO_MIN_HOT_COVERAGE=${PGO_MIN_HOT_COVERAGE}% of the hot objects, so this is "
             "no PGO build (a profile of a reduced build, or of other code?)")
  ENDIF()
  MESSAGE(STATUS "PGO: ${line}")
ENDFUNCTION()

IF(CMAKE_SCRIPT_MODE_FILE)
  INCLUDE("${PGO_SETTINGS}")
  IF("${PGO_STEP}" STREQUAL "identify")
    PGO_STEP_IDENTIFY()
  ELSEIF("${PGO_STEP}" STREQUAL "train")
    PGO_STEP_TRAIN()
  ELSEIF("${PGO_STEP}" STREQUAL "report")
    PGO_STEP_REPORT()
  ELSE()
    PGO_FAIL("unknown step '${PGO_STEP}' (known: identify, train, report)")
  ENDIF()
  RETURN()
ENDIF()

# ---------------------------------------------------------------------------------------------
# Configure time.
# ---------------------------------------------------------------------------------------------

OPTION(WITH_PGO "Build with GCC profile-guided optimisation, trained by the project's training" OFF)
SET(PGO_PROFILE "" CACHE PATH "Build with this published profile (archive entry or its profile.tar.xz)")
OPTION(PGO_PROFILE_ACCEPT_STALE "Take a PGO_PROFILE trained on another version of the same line" OFF)
# The pipeline's default (pgo build --min-hot-coverage): a build whose hot objects got less of the
# profile is no PGO build worth its label, and fails.
SET(PGO_MIN_HOT_COVERAGE 30 CACHE STRING "Percent of the hot objects that must compile with their .gcda")
IF(NOT PGO_MIN_HOT_COVERAGE MATCHES "^[0-9]+$" OR PGO_MIN_HOT_COVERAGE GREATER 100)
  PGO_FAIL("PGO_MIN_HOT_COVERAGE=${PGO_MIN_HOT_COVERAGE} is no percentage (a whole number from 0 to 100)")
ENDIF()
SET(PGO_WORK_DIR "${CMAKE_BINARY_DIR}/pgo")
SET(PGO_INSTRUMENTED_BINARY_DIR "${PGO_WORK_DIR}/instrumented")
SET(PGO_INSTRUMENTED_PREFIX "${PGO_WORK_DIR}/stage")
SET(PGO_TRAINING_DIR "${PGO_WORK_DIR}/training")
SET(PGO_TRAINING_WORK_DIR "${PGO_WORK_DIR}/training-work")

FUNCTION(PGO_TRAINING)
  # Recorded for PGO_FINISH, which runs when the top folder's CMakeLists.txt has been read.
  GET_PROPERTY(named GLOBAL PROPERTY PGO_TRAINING_NAMED)
  IF(named)
    PGO_FAIL("PGO_TRAINING names the training a second time: a project has one")
  ENDIF()
  SET(keywords PRODUCT VERSION HOT_DIRS TARGETS INSTALL CMAKE_ARGS MATCH_OPTIONS COMMAND)
  SET(key "")
  SET(commands 0)
  FOREACH(word IN LISTS ARGN)
    IF(word IN_LIST keywords)
      SET(key "${word}")
      IF("${key}" STREQUAL "COMMAND")
        MATH(EXPR commands "${commands} + 1")
        SET_PROPERTY(GLOBAL APPEND PROPERTY PGO_COMMANDS ${commands})
        SET(key "COMMAND_${commands}")
      ELSEIF("${key}" STREQUAL "INSTALL")
        SET_PROPERTY(GLOBAL PROPERTY PGO_INSTALL ON)
      ENDIF()
    ELSEIF("${key}" STREQUAL "" OR "${key}" STREQUAL "INSTALL")
      PGO_FAIL("PGO_TRAINING: unexpected argument '${word}'")
    ELSE()
      SET_PROPERTY(GLOBAL APPEND PROPERTY PGO_${key} "${word}")
    ENDIF()
  ENDFOREACH()
  SET_PROPERTY(GLOBAL PROPERTY PGO_TRAINING_NAMED ON)

  # What this build is, for the project's version comment (MariaDB's COMPILATION_COMMENT), which a
  # folder configured before PGO_FINISH writes out: PGO_BUILD_LABEL in the caller's scope. The
  # label stands on this build's own check: a profile that does not fit fails the configure
  # (PGO_FINISH), and a build whose hot objects got too little of the profile fails at its end
  # (PGO_MIN_HOT_COVERAGE), so no finished build carries the label without the profile applied.
  IF("${PGO_MODE}" STREQUAL "train")
    SET(PGO_BUILD_LABEL "PGO build, trained in this build" PARENT_SCOPE)
  ELSEIF("${PGO_MODE}" STREQUAL "profile")
    # The profile's id, as the pipeline's builds name it (its stale mark too); an entry without a
    # readable manifest gets no label here, and PGO_FINISH refuses it.
    PGO_PUBLISHED_ENTRY(entry)
    GET_PROPERTY(version GLOBAL PROPERTY PGO_VERSION)
    SET(manifest "")
    IF(EXISTS "${entry}/manifest.json")
      FILE(READ "${entry}/manifest.json" manifest)
    ENDIF()
    STRING(JSON id ERROR_VARIABLE no_id GET "${manifest}" profile_id)
    STRING(JSON trained ERROR_VARIABLE no_version GET "${manifest}" version)
    IF(NOT no_id AND NOT no_version)
      IF("${trained}" STREQUAL "${version}")
        SET(PGO_BUILD_LABEL "PGO build, profile ${id}" PARENT_SCOPE)
      ELSE()
        SET(PGO_BUILD_LABEL "PGO build, stale profile ${id}" PARENT_SCOPE)
      ENDIF()
    ENDIF()
  ENDIF()
ENDFUNCTION()

IF(DEFINED PGO_INSTRUMENT)
  SET(PGO_MODE "instrumented")
ELSEIF(WITH_PGO AND PGO_PROFILE)
  PGO_FAIL("WITH_PGO trains a profile and PGO_PROFILE names one: give one of them")
ELSEIF(WITH_PGO)
  SET(PGO_MODE "train")
ELSEIF(PGO_PROFILE)
  SET(PGO_MODE "profile")
ELSE()
  RETURN()
ENDIF()

IF(CMAKE_VERSION VERSION_LESS 3.19)
  PGO_FAIL("profile-guided optimisation needs CMake 3.19 or later, this is CMake ${CMAKE_VERSION}")
ENDIF()
# What this build was given, for the instrumented build (PGO_FORWARDED_CACHE): the cache entries there
# are when the project includes this file, before it configures its parts. An entry the project makes
# later is made again by the instrumented build's own configure, as here: forwarded, it would configure
# that build otherwise. (MariaDB's mysql_release.cmake sets PLUGIN_FEDERATEDX=STATIC as a variable
# that its plugin.cmake's CACHE entry, DYNAMIC when new, replaces, but leaves in place when the entry
# exists: the instrumented federatedx became static, the optimised one a module, and GCC 12.2 crashed on
# the profile of the one for the other.) On a later configure, the entries that were not there at the end
# of the last one are given too.
IF("${PGO_MODE}" STREQUAL "train")
  GET_CMAKE_PROPERTY(pgo_cache_names CACHE_VARIABLES)
  IF(NOT DEFINED CACHE{PGO_GIVEN_CACHE})
    # CMake writes its version into a cache it saved: a folder configured before without WITH_PGO.
    IF(DEFINED CACHE{CMAKE_CACHE_MAJOR_VERSION})
      MESSAGE(WARNING " PGO: ${CMAKE_BINARY_DIR} was configured before without WITH_PGO: its instrumented build "
                      "takes all of its cache, what the project made of it too, and may be configured otherwise "
                      "than this one; configure WITH_PGO in a new folder")
    ENDIF()
    SET(PGO_GIVEN_CACHE "${pgo_cache_names}" CACHE INTERNAL "cache entries given to this build (pgo.cmake)")
  ELSE()
    IF(PGO_SEEN_CACHE)
      LIST(REMOVE_ITEM pgo_cache_names ${PGO_SEEN_CACHE})
    ENDIF()
    SET(pgo_given "$CACHE{PGO_GIVEN_CACHE}" ${pgo_cache_names})
    LIST(REMOVE_DUPLICATES pgo_given)
    SET(PGO_GIVEN_CACHE "${pgo_given}" CACHE INTERNAL "cache entries given to this build (pgo.cmake)")
  ENDIF()
ENDIF()
# The commands CMake generated, per object (compile_commands.json): with each object's own record
# of its options, what a check of the finished build compares (the pipeline's pgo adopt-debs).
SET(CMAKE_EXPORT_COMPILE_COMMANDS ON)
# The profile is GCC's (.gcda files, and the flags below): no other compiler reads it.
GET_PROPERTY(pgo_languages GLOBAL PROPERTY ENABLED_LANGUAGES)
FOREACH(lang C CXX)
  IF(lang IN_LIST pgo_languages)
    IF(NOT "${CMAKE_${lang}_COMPILER_ID}" STREQUAL "GNU")
      PGO_FAIL("profile-guided optimisation here is GCC's, but the ${lang} compiler ${CMAKE_${lang}_COMPILER} "
               "is ${CMAKE_${lang}_COMPILER_ID} ${CMAKE_${lang}_COMPILER_VERSION}: configure with GCC "
               "(-DCMAKE_${lang}_COMPILER=gcc), or without WITH_PGO and PGO_PROFILE")
    ENDIF()
    IF(CMAKE_${lang}_COMPILER_VERSION VERSION_LESS 10)
      PGO_FAIL("profile-guided optimisation here needs GCC 10 or later (-fprofile-prefix-path, "
               "-fprofile-partial-training), the ${lang} compiler is GCC ${CMAKE_${lang}_COMPILER_VERSION}")
    ENDIF()
  ENDIF()
ENDFOREACH()

# The flags, each with why. The variants differ only in these: the instrumented build and this
# one compile the same source with the same options otherwise (the instrumented build gets this
# build's cache, PGO_FINISH).
FUNCTION(PGO_INSTRUMENT_FLAGS profile_dir build_dir compile_out link_out)
  SET(${compile_out}
    # Counters into profile_dir, one .gcda per object, named after the object.
    "-fprofile-generate=${profile_dir}"
    # A server's threads update the same counters at once: without atomic updates concurrent
    # increments are lost and the profile is skewed. prefer-atomic falls back to plain updates
    # on targets that have no atomic 64-bit operations.
    "-fprofile-update=prefer-atomic"
    # Name each .gcda relative to the build tree, not by its absolute path: the instrumented tree
    # and the optimised one are different folders, with the same objects below them.
    "-fprofile-prefix-path=${build_dir}"
    # The compiler's options in each object (.GCC.command.line): the objects themselves show
    # what they were compiled with. Notes beside the code; the code is the same.
    "-frecord-gcc-switches"
    PARENT_SCOPE)
  # The link pulls in libgcov, which writes the counters when the program exits.
  SET(${link_out} "-fprofile-generate=${profile_dir}" PARENT_SCOPE)
ENDFUNCTION()

FUNCTION(PGO_USE_FLAGS profile_dir build_dir compile_out)
  SET(${compile_out}
    "-fprofile-use=${profile_dir}"
    # The counters of a multi-threaded run are not exactly consistent (prefer-atomic may fall
    # back, and a thread may still run when the program exits): correct them instead of
    # refusing the profile.
    "-fprofile-correction"
    # Code the training never ran is optimised as without a profile, not for size as if it
    # never ran anywhere: a training covers the hot paths, not every path users take.
    "-fprofile-partial-training"
    # The .gcda names are relative to the build tree that made them (see above): look them up
    # relative to this one.
    "-fprofile-prefix-path=${build_dir}"
    # A function changed since the training keeps compiling, without its profile, instead of
    # failing the build (GCC makes -Wcoverage-mismatch an error by default); the build's report
    # says how much of the profile applied.
    "-Wno-error=coverage-mismatch"
    # Name each object and function compiled without a profile.
    "-Wmissing-profile"
    # As in the instrumented build: each object shows it was compiled with the profile.
    "-frecord-gcc-switches"
    PARENT_SCOPE)
ENDFUNCTION()

# Every target of the tree that compiles, in every folder.
FUNCTION(PGO_COMPILED_TARGETS dir out)
  GET_PROPERTY(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  SET(compiled)
  FOREACH(target IN LISTS targets)
    GET_TARGET_PROPERTY(type ${target} TYPE)
    IF(type MATCHES "^(EXECUTABLE|STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY)$")
      LIST(APPEND compiled ${target})
    ENDIF()
  ENDFOREACH()
  GET_PROPERTY(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  FOREACH(sub IN LISTS subdirs)
    PGO_COMPILED_TARGETS("${sub}" more)
    LIST(APPEND compiled ${more})
  ENDFOREACH()
  SET(${out} ${compiled} PARENT_SCOPE)
ENDFUNCTION()

# The flags go on each target, after its own options (GCC takes the last of conflicting ones),
# for C and C++ only: an assembler or another language's compiler has no use for them.
FUNCTION(PGO_ADD_FLAGS target compile link)
  SET(options)
  FOREACH(flag IN LISTS compile)
    STRING(REPLACE ">" "$<ANGLE-R>" flag "${flag}")
    STRING(REPLACE "," "$<COMMA>" flag "${flag}")
    LIST(APPEND options "$<$<COMPILE_LANGUAGE:C,CXX>:${flag}>")
  ENDFOREACH()
  TARGET_COMPILE_OPTIONS(${target} PRIVATE ${options})
  GET_TARGET_PROPERTY(type ${target} TYPE)
  IF(link AND type MATCHES "^(EXECUTABLE|SHARED_LIBRARY|MODULE_LIBRARY)$")
    TARGET_LINK_OPTIONS(${target} PRIVATE ${link})
  ENDIF()
ENDFUNCTION()

# Every object of a target depends on the profile's stamp: a new profile recompiles it.
FUNCTION(PGO_DEPEND_ON_PROFILE target stamp)
  GET_TARGET_PROPERTY(sources ${target} SOURCES)
  GET_TARGET_PROPERTY(dir ${target} SOURCE_DIR)
  SET(files)
  FOREACH(source IN LISTS sources)
    # A source named by a generator expression is known only at generation: its object does not
    # see a new profile until its own source or flags change.
    IF(source MATCHES "^\\$<")
      CONTINUE()
    ENDIF()
    IF(NOT IS_ABSOLUTE "${source}")
      SET(source "${dir}/${source}")
    ENDIF()
    LIST(APPEND files "${source}")
  ENDFOREACH()
  IF(files)
    SET_PROPERTY(SOURCE ${files} TARGET_DIRECTORY ${target} APPEND PROPERTY OBJECT_DEPENDS "${stamp}")
  ENDIF()
ENDFUNCTION()

# The cache this build was given (PGO_GIVEN_CACHE), with its values now, for the instrumented one: the
# same compiler, build type, flags and options, configured as this build was, so that both compile the
# same code. Left out: what CMake and the configure checks keep for themselves (INTERNAL, STATIC), this
# module's settings, and values that name this build tree (the instrumented tree makes its own).
FUNCTION(PGO_FORWARDED_CACHE out)
  GET_CMAKE_PROPERTY(names CACHE_VARIABLES)
  # What the next configure compares the entries it is given with.
  SET(PGO_SEEN_CACHE "${names}" CACHE INTERNAL "cache entries at the end of the last configure (pgo.cmake)")
  SET(script "# Written by pgo.cmake: the cache of ${CMAKE_BINARY_DIR}, for its instrumented build.\n")
  FOREACH(name IN LISTS names)
    IF(NOT name IN_LIST PGO_GIVEN_CACHE)
      CONTINUE()
    ENDIF()
    GET_PROPERTY(type CACHE "${name}" PROPERTY TYPE)
    GET_PROPERTY(value CACHE "${name}" PROPERTY VALUE)
    IF(type MATCHES "^(INTERNAL|STATIC)$" OR name MATCHES "^(WITH_PGO|PGO_.*)$")
      CONTINUE()
    ENDIF()
    # An entry without type or value is a placeholder that MARK_AS_ADVANCED made of a variable no one
    # cached (policy CMP0102 unset: MariaDB's readline.cmake marks FindCurses' CURSES_HAVE_CURSES_H);
    # forwarded, it would define the variable empty, which the find module takes for its answer ("no
    # curses.h", and the client does not compile).
    IF("${type}" STREQUAL "UNINITIALIZED" AND "${value}" STREQUAL "")
      CONTINUE()
    ENDIF()
    STRING(FIND "${value}" "${CMAKE_BINARY_DIR}" at)
    IF(NOT "${at}" EQUAL -1)
      CONTINUE()
    ENDIF()
    IF("${type}" STREQUAL "UNINITIALIZED")
      SET(type STRING)
    ENDIF()
    PGO_BRACKET("${value}" quoted)
    STRING(APPEND script "SET(${name} ${quoted} CACHE ${type} \"\" FORCE)\n")
  ENDFOREACH()
  SET(${out} "${script}" PARENT_SCOPE)
ENDFUNCTION()

# Flags without the options that change no code: warnings and debug information (-Wp, -Wa and
# -Wl pass options on, and stay), and an option given again as it was (debhelper's CMake build
# adds CPPFLAGS to CFLAGS, and Debian's mariadb rules do too: -D_FORTIFY_SOURCE=2 twice); joined
# by spaces.
FUNCTION(PGO_CODE_FLAGS out)
  SET(kept)
  FOREACH(word IN LISTS ARGN)
    IF(word MATCHES "^-" AND word IN_LIST kept)
      CONTINUE()
    ENDIF()
    IF(NOT word MATCHES "^-W[^pal]|^-W[pal][^,]|^-W$|^-g")
      LIST(APPEND kept "${word}")
    ENDIF()
  ENDFOREACH()
  LIST(JOIN kept " " kept)
  SET(${out} "${kept}" PARENT_SCOPE)
ENDFUNCTION()

# A manifest's value at a path of keys; a manifest without it is no manifest of this format.
FUNCTION(PGO_MANIFEST_GET manifest where out)
  STRING(JSON value ERROR_VARIABLE error GET "${manifest}" ${ARGN})
  IF(error)
    LIST(JOIN ARGN "." key)
    PGO_FAIL("the profile ${where}: manifest.json has no ${key} (${error}): it is no manifest of a PGO "
             "pipeline profile")
  ENDIF()
  SET(${out} "${value}" PARENT_SCOPE)
ENDFUNCTION()

FUNCTION(PGO_MANIFEST_LIST manifest where out)
  STRING(JSON count ERROR_VARIABLE error LENGTH "${manifest}" ${ARGN})
  IF(error)
    LIST(JOIN ARGN "." key)
    PGO_FAIL("the profile ${where}: manifest.json has no list ${key} (${error})")
  ENDIF()
  SET(items)
  IF(count GREATER 0)
    MATH(EXPR last "${count} - 1")
    FOREACH(index RANGE ${last})
      STRING(JSON item GET "${manifest}" ${ARGN} ${index})
      LIST(APPEND items "${item}")
    ENDFOREACH()
  ENDIF()
  SET(${out} ${items} PARENT_SCOPE)
ENDFUNCTION()

# The environment a published profile's build had, "NAME=value" sorted, and this build's, as the
# pipeline records it (pgo/toolchain.py build_environment: a launcher named with its checksum).
FUNCTION(PGO_THIS_ENVIRONMENT out)
  SET(found)
  FOREACH(name IN LISTS PGO_BUILD_ENVIRONMENT)
    IF(NOT "$ENV{${name}}" STREQUAL "")
      LIST(APPEND found "${name}=$ENV{${name}}")
    ENDIF()
  ENDFOREACH()
  GET_PROPERTY(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  FOREACH(lang IN LISTS languages)
    FOREACH(kind COMPILER LINKER)
      SET(name "CMAKE_${lang}_${kind}_LAUNCHER")
      SET(value "${${name}}")
      IF("${value}" STREQUAL "")
        CONTINUE()
      ENDIF()
      LIST(GET value 0 program)
      FIND_PROGRAM(PGO_LAUNCHER_PROGRAM "${program}")
      SET(path "${PGO_LAUNCHER_PROGRAM}")
      UNSET(PGO_LAUNCHER_PROGRAM CACHE)
      IF(path)
        FILE(SHA256 "${path}" sum)
        STRING(SUBSTRING "${sum}" 0 12 sum)
        STRING(REPLACE ";" "\\;" value "${value}")
        LIST(APPEND found "${name}=${value} (sha256 ${sum})")
      ELSE()
        LIST(APPEND found "${name}=${value} (not found)")
      ENDIF()
    ENDFOREACH()
  ENDFOREACH()
  LIST(SORT found)
  SET(${out} ${found} PARENT_SCOPE)
ENDFUNCTION()

# What a published profile must share with this build before it is used. The pipeline's flags
# fingerprint is a hash of its configuration (every variant's flags and CMake options, a reduced
# variant's too), which a build that is not the pipeline's cannot recompute; so this compares
# what the fingerprint stands for and a build can see:
#   - GCC's version (manifest compiler.version; the .gcda format is version specific) and target;
#   - the product and its version (the source identity a source tree carries: the pipeline's
#     source checksum is of what it downloaded, a .dsc or a tarball, which a tree cannot
#     recompute). Another version of the same line only with PGO_PROFILE_ACCEPT_STALE;
#   - the flags (manifest flags, the optimised build's compile flags): without the profile flags
#     this module sets itself, and without warnings and debug options, the rest must be this
#     build's CMAKE_C_FLAGS (CMAKE_CXX_FLAGS), word for word and in order (an -O there aside when
#     the build type's flags set the level after it);
#   - the options named by MATCH_OPTIONS (default CMAKE_BUILD_TYPE) that the manifest's
#     cmake_args set: the same values here;
#   - the build environment (compiler launchers, GCC's environment variables).
# Returns the manifest's profile id, whether it is stale, and what it was trained on.
FUNCTION(PGO_CHECK_PUBLISHED where manifest product version match_options id_out stale_out trained_out)
  PGO_MANIFEST_GET("${manifest}" "${where}" format format)
  IF(NOT "${format}" EQUAL "${PGO_MANIFEST_FORMAT}")
    PGO_FAIL("the profile ${where} has a manifest of format ${format}; this module reads format "
             "${PGO_MANIFEST_FORMAT}")
  ENDIF()
  PGO_MANIFEST_GET("${manifest}" "${where}" id profile_id)

  PGO_MANIFEST_GET("${manifest}" "${where}" gcc compiler version)
  GET_PROPERTY(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  FOREACH(lang C CXX)
    IF(lang IN_LIST languages AND NOT "${gcc}" STREQUAL "${CMAKE_${lang}_COMPILER_VERSION}")
      PGO_FAIL("the profile ${where} was made by GCC ${gcc}, this build's ${lang} compiler is GCC "
               "${CMAKE_${lang}_COMPILER_VERSION}: GCC reads only the .gcda files of its own version")
    ENDIF()
  ENDFOREACH()
  PGO_MANIFEST_GET("${manifest}" "${where}" target compiler target)
  EXECUTE_PROCESS(COMMAND "${CMAKE_C_COMPILER}" -dumpmachine OUTPUT_VARIABLE machine
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  IF(NOT "${target}" STREQUAL "${machine}")
    PGO_FAIL("the profile ${where} was made for ${target}, this build compiles for ${machine}")
  ENDIF()

  PGO_MANIFEST_GET("${manifest}" "${where}" their_product product)
  PGO_MANIFEST_GET("${manifest}" "${where}" their_version version)
  PGO_MANIFEST_GET("${manifest}" "${where}" their_line line)
  PGO_MANIFEST_GET("${manifest}" "${where}" source_kind source kind)
  PGO_MANIFEST_GET("${manifest}" "${where}" source_sum source checksum)
  STRING(SUBSTRING "${source_sum}" 0 12 source_sum)
  SET(trained "${their_product} ${their_version} (source ${source_kind} ${source_sum})")
  IF(NOT "${their_product}" STREQUAL "${product}")
    PGO_FAIL("the profile ${where} was trained on ${trained}, this is ${product} ${version}: another product")
  ENDIF()
  STRING(REGEX MATCH "^[0-9]+\\.[0-9]+" line "${version}")
  SET(stale OFF)
  IF(NOT "${their_version}" STREQUAL "${version}")
    IF(NOT "${their_line}" STREQUAL "${line}")
      PGO_FAIL("the profile ${where} was trained on ${trained}, this is ${product} ${version}: another line "
               "than ${their_line}")
    ELSEIF(NOT PGO_PROFILE_ACCEPT_STALE)
      PGO_FAIL("the profile ${where} was trained on ${trained}, this is ${product} ${version}: another source "
               "(-DPGO_PROFILE_ACCEPT_STALE=ON takes a profile of another version of line ${line}, for the "
               "functions that did not change)")
    ENDIF()
    SET(stale ON)
  ENDIF()

  PGO_MANIFEST_LIST("${manifest}" "${where}" their_flags flags)
  PGO_USE_FLAGS("${PGO_PLACEHOLDER_PROFILE_DIR}" "${PGO_PLACEHOLDER_BUILD_DIR}" ours)
  FOREACH(flag IN LISTS ours)
    IF(NOT flag IN_LIST their_flags)
      PGO_FAIL("the profile ${where} was used with other profile flags than this module's (no ${flag} among "
               "them): a profile of another pipeline version")
    ENDIF()
  ENDFOREACH()
  LIST(REMOVE_ITEM their_flags ${ours})
  PGO_CODE_FLAGS(their_code ${their_flags})
  FOREACH(lang C CXX)
    IF(lang IN_LIST languages)
      # An -O level in CMAKE_<LANG>_FLAGS changes nothing when the build type's flags, which come
      # after it, give one (debian/rules' CFLAGS have -O2, RelWithDebInfo's flags -O2 too): the
      # pipeline records such flags without it.
      STRING(TOUPPER "${CMAKE_BUILD_TYPE}" type)
      SET(decided OFF)
      IF(type AND " ${CMAKE_${lang}_FLAGS_${type}}" MATCHES " -O")
        SET(decided ON)
      ENDIF()
      # This build's source and build folders as the pipeline's placeholders for its own. The flags
      # the build was given (the cache's, from -D or the environment's CFLAGS), as the pipeline
      # records the ones it gave: what the project adds itself (MariaDB's BUILD_CONFIG adds -fPIC
      # and -fstack-protector) it adds to both, and MATCH_OPTIONS compares what decides that.
      SEPARATE_ARGUMENTS(words UNIX_COMMAND "$CACHE{CMAKE_${lang}_FLAGS}")
      SET(placed)
      FOREACH(word IN LISTS words)
        IF(decided AND word MATCHES "^-O")
          CONTINUE()
        ENDIF()
        STRING(REPLACE "${CMAKE_SOURCE_DIR}" "${PGO_PLACEHOLDER_SOURCE_DIR}" word "${word}")
        STRING(REPLACE "${CMAKE_BINARY_DIR}" "${PGO_PLACEHOLDER_BUILD_DIR}" word "${word}")
        LIST(APPEND placed "${word}")
      ENDFOREACH()
      PGO_CODE_FLAGS(mine ${placed})
      IF(NOT "${mine}" STREQUAL "${their_code}")
        PGO_FAIL("the profile ${where} was made with the flags '${their_code}', this build's "
                 "CMAKE_${lang}_FLAGS are '${mine}' (warnings, -g and an -O the build type overrides aside): "
                 "other code, whose profile does not fit")
      ENDIF()
    ENDIF()
  ENDFOREACH()

  PGO_MANIFEST_LIST("${manifest}" "${where}" their_args cmake_args)
  FOREACH(option IN LISTS match_options)
    SET(theirs "")
    SET(given OFF)
    FOREACH(arg IN LISTS their_args)
      IF(arg MATCHES "^-D${option}(:[A-Za-z]+)?=(.*)$")
        SET(theirs "${CMAKE_MATCH_2}")
        SET(given ON)
      ENDIF()
    ENDFOREACH()
    SET(here "${${option}}")
    IF("${option}" STREQUAL "CMAKE_BUILD_TYPE")
      # CMake takes a build type in any case (CMAKE_C_FLAGS_<CONFIG>).
      STRING(TOUPPER "${theirs}" theirs_key)
      STRING(TOUPPER "${here}" here_key)
    ELSE()
      SET(theirs_key "${theirs}")
      SET(here_key "${here}")
    ENDIF()
    IF(given AND NOT "${theirs_key}" STREQUAL "${here_key}")
      PGO_FAIL("the profile ${where} was made with -D${option}=${theirs}, this build has ${option}=${here}: "
               "other code, whose profile does not fit")
    ENDIF()
  ENDFOREACH()

  STRING(JSON count ERROR_VARIABLE error LENGTH "${manifest}" build_environment)
  SET(theirs)
  IF(NOT error AND count GREATER 0)
    MATH(EXPR last "${count} - 1")
    FOREACH(index RANGE ${last})
      STRING(JSON name MEMBER "${manifest}" build_environment ${index})
      STRING(JSON value GET "${manifest}" build_environment "${name}")
      STRING(REPLACE ";" "\\;" value "${value}")
      LIST(APPEND theirs "${name}=${value}")
    ENDFOREACH()
  ENDIF()
  LIST(SORT theirs)
  PGO_THIS_ENVIRONMENT(mine)
  IF(NOT "${theirs}" STREQUAL "${mine}")
    SET(their_words "${theirs}")
    SET(my_words "${mine}")
    LIST(JOIN their_words ", " their_words)
    LIST(JOIN my_words ", " my_words)
    IF("${their_words}" STREQUAL "")
      SET(their_words "none")
    ENDIF()
    IF("${my_words}" STREQUAL "")
      SET(my_words "none")
    ENDIF()
    PGO_FAIL("the profile ${where} was made in the build environment ${their_words}, this build's is "
             "${my_words}: a launcher or GCC's environment may change the code")
  ENDIF()
  SET(${id_out} "${id}" PARENT_SCOPE)
  SET(${stale_out} "${stale}" PARENT_SCOPE)
  SET(${trained_out} "${their_product} ${their_version}" PARENT_SCOPE)
ENDFUNCTION()

# PGO_PROFILE: check the published profile and unpack it as this build's profile folder.
# The archive entry folder PGO_PROFILE names (itself, or the folder of its profile.tar.xz).
FUNCTION(PGO_PUBLISHED_ENTRY out)
  GET_FILENAME_COMPONENT(given "${PGO_PROFILE}" ABSOLUTE BASE_DIR "${CMAKE_BINARY_DIR}")
  IF(IS_DIRECTORY "${given}")
    SET(entry "${given}")
  ELSE()
    GET_FILENAME_COMPONENT(entry "${given}" DIRECTORY)
    GET_FILENAME_COMPONENT(name "${given}" NAME)
    IF(NOT "${name}" STREQUAL "profile.tar.xz")
      PGO_FAIL("PGO_PROFILE=${PGO_PROFILE} is neither an archive entry folder nor its profile.tar.xz")
    ENDIF()
  ENDIF()
  SET(${out} "${entry}" PARENT_SCOPE)
ENDFUNCTION()

FUNCTION(PGO_USE_PUBLISHED product version match_options label_out)
  PGO_PUBLISHED_ENTRY(entry)
  SET(where "${entry}")
  FOREACH(name profile.tar.xz manifest.json sha256sums.txt)
    IF(NOT EXISTS "${entry}/${name}")
      PGO_FAIL("the profile ${where} has no ${name}: a published profile is profile.tar.xz with manifest.json "
               "and sha256sums.txt beside it")
    ENDIF()
  ENDFOREACH()

  # Nothing is read that sha256sums.txt does not prove.
  FILE(STRINGS "${entry}/sha256sums.txt" sums)
  SET(listed)
  FOREACH(line IN LISTS sums)
    IF(NOT line MATCHES "^([0-9a-f]+)  (.+)$")
      PGO_FAIL("the profile ${where}: sha256sums.txt has a line that is no checksum ('${line}')")
    ENDIF()
    SET(sum "${CMAKE_MATCH_1}")
    SET(name "${CMAKE_MATCH_2}")
    IF(NOT EXISTS "${entry}/${name}")
      PGO_FAIL("the profile ${where}: ${name}, listed in sha256sums.txt, is missing")
    ENDIF()
    FILE(SHA256 "${entry}/${name}" actual)
    IF(NOT "${actual}" STREQUAL "${sum}")
      PGO_FAIL("the profile ${where}: ${name} does not match its checksum in sha256sums.txt: damaged, not "
               "used")
    ENDIF()
    LIST(APPEND listed "${name}")
  ENDFOREACH()
  FOREACH(name profile.tar.xz manifest.json)
    IF(NOT name IN_LIST listed)
      PGO_FAIL("the profile ${where}: sha256sums.txt does not list ${name}, so nothing proves it")
    ENDIF()
  ENDFOREACH()

  FILE(READ "${entry}/manifest.json" manifest)
  STRING(JSON type ERROR_VARIABLE error TYPE "${manifest}")
  IF(error OR NOT "${type}" STREQUAL "OBJECT")
    PGO_FAIL("the profile ${where}: manifest.json is no JSON object")
  ENDIF()
  PGO_CHECK_PUBLISHED("${where}" "${manifest}" "${product}" "${version}" "${match_options}" id stale trained)

  # The .gcda files as the manifest lists them (name and checksum), and no others.
  SET(unpacking "${PGO_WORK_DIR}/profile.unpacking")
  FILE(REMOVE_RECURSE "${unpacking}")
  FILE(ARCHIVE_EXTRACT INPUT "${entry}/profile.tar.xz" DESTINATION "${unpacking}" PATTERNS "profile/*")
  FILE(GLOB unpacked RELATIVE "${unpacking}/profile" "${unpacking}/profile/*")
  STRING(JSON count LENGTH "${manifest}" files)
  SET(expected)
  IF(count GREATER 0)
    MATH(EXPR last "${count} - 1")
    FOREACH(index RANGE ${last})
      STRING(JSON name GET "${manifest}" files ${index} name)
      STRING(JSON sum GET "${manifest}" files ${index} sha256)
      SET(actual "")
      IF(EXISTS "${unpacking}/profile/${name}")
        FILE(SHA256 "${unpacking}/profile/${name}" actual)
      ENDIF()
      IF(NOT "${actual}" STREQUAL "${sum}")
        PGO_FAIL("the profile ${where}: profile.tar.xz does not hold ${name} as manifest.json lists it")
      ENDIF()
      LIST(APPEND expected "${name}")
    ENDFOREACH()
  ENDIF()
  LIST(REMOVE_ITEM unpacked ${expected})
  IF(unpacked)
    LIST(GET unpacked 0 first)
    PGO_FAIL("the profile ${where}: profile.tar.xz holds ${first}, which manifest.json does not list")
  ENDIF()

  # A profile other than the last one replaces it, then the stamp every object depends on.
  SET(old "")
  IF(EXISTS "${PGO_WORK_DIR}/profile.id")
    FILE(STRINGS "${PGO_WORK_DIR}/profile.id" old LIMIT_COUNT 1)
  ENDIF()
  IF(NOT "${old}" STREQUAL "${id}" OR NOT IS_DIRECTORY "${PGO_WORK_DIR}/profile")
    FILE(REMOVE_RECURSE "${PGO_WORK_DIR}/profile")
    FILE(RENAME "${unpacking}/profile" "${PGO_WORK_DIR}/profile")
    FILE(WRITE "${PGO_WORK_DIR}/profile.id" "${id}\n")
  ENDIF()
  # What the profile is, beside it: what a check of the finished build reads (pgo adopt-debs).
  CONFIGURE_FILE("${entry}/manifest.json" "${PGO_WORK_DIR}/profile.manifest.json" COPYONLY)
  FILE(REMOVE_RECURSE "${unpacking}")
  # GCC names the profile of a function that is not public (static, in an anonymous namespace) by
  # its source file's path too: from another folder than the training's it finds none for them,
  # and uses the others' (GCC 12, measured). The pipeline's manifest says where its source was.
  STRING(JSON trained_dir ERROR_VARIABLE no_dir GET "${manifest}" source_dir)
  IF(NOT no_dir AND NOT "${trained_dir}" STREQUAL "${CMAKE_SOURCE_DIR}")
    MESSAGE(WARNING " PGO: the profile ${id} was trained on the source in ${trained_dir}, this build's is in "
                    "${CMAKE_SOURCE_DIR}: GCC finds no profile for the functions that are not public (static, in "
                    "anonymous namespaces) then, and uses the rest; configure the source from ${trained_dir} to "
                    "use all of it")
  ENDIF()
  IF(stale)
    MESSAGE(STATUS "PGO: stale profile ${id} (${where}): trained on ${trained}, this is ${version}; GCC drops "
                   "the profile of each function that changed (-Wcoverage-mismatch)")
    SET(${label_out} "stale profile ${id}" PARENT_SCOPE)
  ELSE()
    MESSAGE(STATUS "PGO: profile ${id} (${where}): checksums, GCC ${CMAKE_C_COMPILER_VERSION}, ${product} "
                   "${version} and flags fit")
    SET(${label_out} "profile ${id}" PARENT_SCOPE)
  ENDIF()
ENDFUNCTION()

# The instrumented build, the training and its check, as steps of this build.
FUNCTION(PGO_ADD_TRAINING hot_dirs)
  INCLUDE(ExternalProject)
  GET_PROPERTY(targets GLOBAL PROPERTY PGO_TARGETS)
  GET_PROPERTY(install GLOBAL PROPERTY PGO_INSTALL)
  GET_PROPERTY(cmake_args GLOBAL PROPERTY PGO_CMAKE_ARGS)
  GET_PROPERTY(commands GLOBAL PROPERTY PGO_COMMANDS)
  IF(NOT commands)
    PGO_FAIL("PGO_TRAINING names no COMMAND: WITH_PGO has no training to run")
  ENDIF()
  IF(targets AND install)
    PGO_FAIL("PGO_TRAINING: TARGETS builds part of the instrumented build, INSTALL all of it: give one of "
             "them")
  ENDIF()

  PGO_FORWARDED_CACHE(cache)
  PGO_WRITE_IF_CHANGED("${PGO_WORK_DIR}/instrumented-cache.cmake" "${cache}")

  IF(targets)
    IF(CMAKE_GENERATOR MATCHES "Make")
      # make's jobserver reaches the instrumented build's make through $(MAKE).
      SET(build_command BUILD_COMMAND "$(MAKE)" ${targets})
    ELSE()
      SET(build_command BUILD_COMMAND "${CMAKE_COMMAND}" --build <BINARY_DIR> --target ${targets})
    ENDIF()
  ELSE()
    SET(build_command)
  ENDIF()
  SET(steps
    SOURCE_DIR "${CMAKE_SOURCE_DIR}"
    BINARY_DIR "${PGO_INSTRUMENTED_BINARY_DIR}"
    PREFIX "${PGO_WORK_DIR}/steps"
    CMAKE_ARGS -C "${PGO_WORK_DIR}/instrumented-cache.cmake" "-DPGO_INSTRUMENT=${PGO_TRAINING_DIR}"
               ${cmake_args}
    # The instrumented tree's own build tool decides what changed in the source.
    BUILD_ALWAYS ON
    ${build_command}
    USES_TERMINAL_CONFIGURE ON
    USES_TERMINAL_BUILD ON
    USES_TERMINAL_INSTALL ON)
  # The install step is written out in both cases: an empty INSTALL_COMMAND kept in a list would
  # vanish, and ExternalProject would install the instrumented build into CMAKE_INSTALL_PREFIX.
  IF(install)
    FILE(REMOVE_RECURSE "${PGO_INSTRUMENTED_PREFIX}")
    # DESTDIR, so that absolute destinations (/etc in Debian's layout) stay inside it too.
    ExternalProject_Add(pgo-instrumented ${steps}
      INSTALL_COMMAND "${CMAKE_COMMAND}" -E env "DESTDIR=${PGO_INSTRUMENTED_PREFIX}"
                      "${CMAKE_COMMAND}" --install <BINARY_DIR> --prefix /)
  ELSE()
    ExternalProject_Add(pgo-instrumented ${steps} INSTALL_COMMAND "")
  ENDIF()
  ExternalProject_Add_StepDependencies(pgo-instrumented configure "${PGO_WORK_DIR}/instrumented-cache.cmake")

  SET(settings "# Written by pgo.cmake: what the build steps of ${CMAKE_BINARY_DIR} read.\n")
  FOREACH(name PGO_WORK_DIR PGO_INSTRUMENTED_BINARY_DIR PGO_INSTRUMENTED_PREFIX PGO_TRAINING_DIR
               PGO_TRAINING_WORK_DIR)
    PGO_SET_LINE(${name} line ${${name}})
    STRING(APPEND settings "${line}")
  ENDFOREACH()
  PGO_SET_LINE(PGO_HOT_DIRS line ${hot_dirs})
  STRING(APPEND settings "${line}")
  PGO_SET_LINE(PGO_COMMANDS line ${commands})
  STRING(APPEND settings "${line}")
  FOREACH(number IN LISTS commands)
    GET_PROPERTY(command GLOBAL PROPERTY PGO_COMMAND_${number})
    PGO_SET_LINE(PGO_COMMAND_${number} line ${command})
    STRING(APPEND settings "${line}")
  ENDFOREACH()
  # gcov-dump of exactly this GCC version reads its .gcda files (the format is version specific);
  # from GCC 12 it marks the counters that are all zero (PGO_RAN).
  STRING(REGEX MATCH "^[0-9]+" major "${CMAKE_C_COMPILER_VERSION}")
  GET_FILENAME_COMPONENT(compiler_dir "${CMAKE_C_COMPILER}" DIRECTORY)
  FIND_PROGRAM(PGO_GCOV_DUMP_FOUND NAMES gcov-dump-${major} gcov-dump HINTS "${compiler_dir}")
  SET(gcov_dump "${PGO_GCOV_DUMP_FOUND}")
  UNSET(PGO_GCOV_DUMP_FOUND CACHE)
  IF(gcov_dump)
    EXECUTE_PROCESS(COMMAND "${gcov_dump}" --version OUTPUT_VARIABLE banner ERROR_QUIET)
    IF(major LESS 12 OR NOT banner MATCHES " ${CMAKE_C_COMPILER_VERSION}\n")
      SET(gcov_dump "")
    ENDIF()
  ENDIF()
  PGO_SET_LINE(PGO_GCOV_DUMP line "${gcov_dump}")
  STRING(APPEND settings "${line}")
  SET(training_settings "${PGO_WORK_DIR}/training-settings.cmake")
  PGO_WRITE_IF_CHANGED("${training_settings}" "${settings}")

  ExternalProject_Add_Step(pgo-instrumented identify
    COMMAND "${CMAKE_COMMAND}" -DPGO_STEP=identify "-DPGO_SETTINGS=${training_settings}"
            -P "${PGO_MODULE_FILE}"
    DEPENDEES install
    ALWAYS ON
    BYPRODUCTS "${PGO_WORK_DIR}/instrumented.id")
  # The training runs again when the instrumented build made something new, or the training or
  # this module changed; the profile's stamp changes only with the profile.
  ADD_CUSTOM_COMMAND(OUTPUT "${PGO_WORK_DIR}/trained.stamp"
    BYPRODUCTS "${PGO_WORK_DIR}/profile.id"
    COMMAND "${CMAKE_COMMAND}" -DPGO_STEP=train "-DPGO_SETTINGS=${training_settings}" -P "${PGO_MODULE_FILE}"
    DEPENDS "${PGO_WORK_DIR}/instrumented.id" "${training_settings}" "${PGO_MODULE_FILE}"
    COMMENT "PGO: training the instrumented build"
    USES_TERMINAL)
  ADD_CUSTOM_TARGET(pgo-profile DEPENDS "${PGO_WORK_DIR}/trained.stamp")
  ADD_DEPENDENCIES(pgo-profile pgo-instrumented)
ENDFUNCTION()

# The end of the top folder's CMakeLists.txt: every target exists.
FUNCTION(PGO_FINISH)
  GET_PROPERTY(named GLOBAL PROPERTY PGO_TRAINING_NAMED)
  IF(NOT named)
    PGO_FAIL("this project names no training: call PGO_TRAINING(...) in its CMakeLists.txt")
  ENDIF()
  GET_PROPERTY(product GLOBAL PROPERTY PGO_PRODUCT)
  GET_PROPERTY(version GLOBAL PROPERTY PGO_VERSION)
  GET_PROPERTY(hot_dirs GLOBAL PROPERTY PGO_HOT_DIRS)
  GET_PROPERTY(match_options GLOBAL PROPERTY PGO_MATCH_OPTIONS)
  IF(NOT match_options)
    SET(match_options CMAKE_BUILD_TYPE)
  ENDIF()
  IF(NOT product OR NOT version OR NOT hot_dirs)
    PGO_FAIL("PGO_TRAINING needs PRODUCT, VERSION and HOT_DIRS")
  ENDIF()
  PGO_COMPILED_TARGETS("${CMAKE_SOURCE_DIR}" targets)

  IF("${PGO_MODE}" STREQUAL "instrumented")
    PGO_INSTRUMENT_FLAGS("${PGO_INSTRUMENT}" "${CMAKE_BINARY_DIR}" compile link)
    FOREACH(target IN LISTS targets)
      PGO_ADD_FLAGS(${target} "${compile}" "${link}")
    ENDFOREACH()
    RETURN()
  ENDIF()

  SET(label "")
  IF("${PGO_MODE}" STREQUAL "train")
    PGO_ADD_TRAINING("${hot_dirs}")
  ELSE()
    PGO_USE_PUBLISHED("${product}" "${version}" "${match_options}" label)
  ENDIF()
  PGO_USE_FLAGS("${PGO_WORK_DIR}/profile" "${CMAKE_BINARY_DIR}" compile)
  FOREACH(target IN LISTS targets)
    PGO_ADD_FLAGS(${target} "${compile}" "")
    PGO_DEPEND_ON_PROFILE(${target} "${PGO_WORK_DIR}/profile.id")
    IF("${PGO_MODE}" STREQUAL "train")
      # No compile of this tree before the training made its profile.
      ADD_DEPENDENCIES(${target} pgo-profile)
    ENDIF()
  ENDFOREACH()

  SET(settings "# Written by pgo.cmake: what the report of ${CMAKE_BINARY_DIR} reads.\n")
  PGO_SET_LINE(PGO_WORK_DIR line "${PGO_WORK_DIR}")
  STRING(APPEND settings "${line}")
  PGO_SET_LINE(PGO_BUILD_DIR line "${CMAKE_BINARY_DIR}")
  STRING(APPEND settings "${line}")
  PGO_SET_LINE(PGO_HOT_DIRS line ${hot_dirs})
  STRING(APPEND settings "${line}")
  PGO_SET_LINE(PGO_LABEL line "${label}")
  STRING(APPEND settings "${line}")
  PGO_SET_LINE(PGO_READELF line "${CMAKE_READELF}")
  STRING(APPEND settings "${line}")
  PGO_SET_LINE(PGO_MIN_HOT_COVERAGE line "${PGO_MIN_HOT_COVERAGE}")
  STRING(APPEND settings "${line}")
  PGO_SET_LINE(PGO_GCC_VERSION line "${CMAKE_C_COMPILER_VERSION}")
  STRING(APPEND settings "${line}")
  PGO_WRITE_IF_CHANGED("${PGO_WORK_DIR}/report-settings.cmake" "${settings}")
  ADD_CUSTOM_TARGET(pgo-report ALL
    COMMAND "${CMAKE_COMMAND}" -DPGO_STEP=report "-DPGO_SETTINGS=${PGO_WORK_DIR}/report-settings.cmake"
            -P "${PGO_MODULE_FILE}"
    VERBATIM)
  IF(targets)
    ADD_DEPENDENCIES(pgo-report ${targets})
  ENDIF()
ENDFUNCTION()

IF(NOT "${PGO_MODE}" STREQUAL "instrumented")
  FILE(MAKE_DIRECTORY "${PGO_WORK_DIR}")
ENDIF()
CMAKE_LANGUAGE(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL PGO_FINISH)
