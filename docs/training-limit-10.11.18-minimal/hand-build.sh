#!/bin/bash
# The hand-build control of issue 16, goal 1 (an experiment, not a product option): MariaDB
# 10.11.18 built by hand with CMake's plain defaults, plain, instrumented and optimised, to learn
# whether the pipeline's build (-DBUILD_CONFIG=mysql_release and its options) loses PGO gain that
# a hand build keeps.
#
#   hand-build.sh OUT STEP [TRAINING COMMAND...]
#
#   OUT   the work folder; every step fills its own part of it:
#           OUT/install/{plain,instrumented,optimized}  the three installed trees (pgo bench takes them)
#           OUT/build/plain, OUT/build/pgo  build trees; the instrumented and the optimised build
#                                           share one path, as in the pipeline (GCC checksums each
#                                           function's source path, and the SQL parser is generated
#                                           into the build tree)
#           OUT/profile                     the .gcda files the training writes
#           OUT/logs/STEP.log               each step's whole output
#   STEP  plain          configure, build and install without a profile
#         instrumented   the same with -fprofile-generate, into OUT/install/instrumented
#         train          empty OUT/profile, then run the training command against the instrumented
#                        install; the words {install} and {profile} in it become those folders.
#                        Default: the benchmark itself, 40 s per workload, as the pipeline's control:
#                          train-on-sysbench.sh {install} {profile} 40
#         optimized      rebuild with -fprofile-use of OUT/profile, into OUT/install/optimized, and
#                        count the compiler's profile warnings
#         all            plain, instrumented, train (with the command given, or the default), optimized
#
# Environment: SRC, the MariaDB source tree (default: the pipeline's cached Debian source tree of
# the 10.11 line, ~/.cache/pgo/src/mariadb-10.11, which
# `python3 -m pgo build --version 10.11.18 --config minimal --phase source` unpacks); it must be
# VERSION (default 10.11.18). The script holds the tree's shared lock, as a pgo build does, so no
# pgo build replaces it meanwhile (a build of another 10.11 version waits). CC and CXX: the
# compilers (gcc, g++); JOBS: ninja's jobs (the CPUs).
#
# Examples (each build about 20 minutes on 2 cores; OUT without spaces):
#   hand-build.sh /srv/hand all
#   hand-build.sh /srv/hand train docs/training-limit-10.11.18-minimal/train-on-sysbench.sh {install} {profile} 120
#   hand-build.sh /srv/hand optimized
#   SRC=~/.cache/pgo/src/mariadb-11.8 VERSION=11.8.6 hand-build.sh /srv/hand118 all   # the 11.8 line
#   python3 -m pgo bench --baseline /srv/hand/install/plain --candidate /srv/hand/install/optimized \
#     --out DIR --workloads oltp_point_select,oltp_read_only,oltp_read_write --threads 1 --pairs 10 --time 8 --rate off
#
# "Plain CMake defaults": no -DBUILD_CONFIG; CMAKE_BUILD_TYPE=RelWithDebInfo (-O2 -g, with
# MariaDB's own -fno-omit-frame-pointer and hardening); SSL, zlib, PCRE and jemalloc as CMake
# chooses (the system's libraries when installed; each configure prints what it chose into the
# step's log and here). Only the large optional parts are off, the same list as pgo/configs.toml's
# `minimal`, and libfmt is the system's, which CMake would otherwise download.
set -euo pipefail

here=$(dirname "$(realpath "$0")")
usage() { sed -n '2,/^set -/{/^#/s/^# \{0,1\}//p}' "$0" >&2; exit 2; }
die() { echo "hand-build: $*" >&2; exit 1; }

[[ $# -ge 2 ]] || usage
out=$1 step=$2
shift 2
case $step in plain|instrumented|train|optimized|all) ;; *) usage ;; esac
[[ $out =~ [[:space:]] ]] && die "OUT must have no spaces: its paths go into compile flags ($out)"
mkdir -p "$out/logs"
out=$(realpath "$out")
version=${VERSION:-10.11.18}
src=$(realpath "${SRC:-${XDG_CACHE_HOME:-$HOME/.cache}/pgo/src/mariadb-10.11}")
cc=${CC:-gcc} cxx=${CXX:-g++} jobs=${JOBS:-$(nproc)}
profile=$out/profile pgo_tree=$out/build/pgo
training=("$@")
[[ ${#training[@]} -gt 0 ]] || training=("$here/train-on-sysbench.sh" '{install}' '{profile}' 40)

# The same source for every step: the version the tree says it is, and no pgo build swapping it.
[[ -f $src/VERSION ]] || die "no MariaDB source tree at $src: unpack it with" \
  "\`python3 -m pgo build --version $version --config minimal --phase source\`, or set SRC"
tree_version=$(sed -n 's/^MYSQL_VERSION_\(MAJOR\|MINOR\|PATCH\)=\([0-9]*\).*/\2/p' "$src/VERSION" | paste -sd.)
[[ $tree_version == "$version" ]] || die "$src holds MariaDB $tree_version, not $version"
exec {lock}>>"$(dirname "$src")/.$(basename "$src").lock"
flock -s -n "$lock" || { echo "waiting for $src: a pgo build is replacing it"; flock -s "$lock"; }

# CMake's defaults, but for what the pipeline's `minimal` turns off and the system's libfmt.
defaults=(
  -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx"
  -DWITH_LIBFMT=system
  -DPLUGIN_ROCKSDB=NO -DPLUGIN_MROONGA=NO -DPLUGIN_SPIDER=NO -DPLUGIN_CONNECT=NO
  -DPLUGIN_COLUMNSTORE=NO -DPLUGIN_OQGRAPH=NO -DPLUGIN_S3=NO -DPLUGIN_SPHINX=NO
  -DPLUGIN_PERFSCHEMA=NO -DWITH_EMBEDDED_SERVER=OFF -DWITH_UNIT_TESTS=OFF -DWITH_WSREP=OFF
  -DWITH_MARIABACKUP=OFF
)

run() {  # a command of the current step, its output into the step's log
  echo "\$ $*" >>"$log"
  "$@" >>"$log" 2>&1 || { tail -n 25 "$log" >&2; die "step $current failed: $1 (whole log: $log)"; }
}

build() {  # VARIANT TREE COMPILE_FLAGS LINK_FLAGS: configure from scratch, compile, install
  local variant=$1 tree=$2 compile_flags=$3 link_flags=$4
  rm -rf "$tree" "$out/install/$variant"
  run cmake -S "$src" -B "$tree" "${defaults[@]}" \
    -DCMAKE_C_FLAGS="$compile_flags" -DCMAKE_CXX_FLAGS="$compile_flags" \
    -DCMAKE_EXE_LINKER_FLAGS="$link_flags" -DCMAKE_SHARED_LINKER_FLAGS="$link_flags" \
    -DCMAKE_MODULE_LINKER_FLAGS="$link_flags" \
    -DCOMPILATION_COMMENT="hand build $version, $variant, CMake defaults"
  grep -E '^(CMAKE_BUILD_TYPE|WITH_(SSL|ZLIB|PCRE|JEMALLOC|LIBFMT)|LIBJEMALLOC|CMAKE_C_FLAGS_RELWITHDEBINFO):' \
    "$tree/CMakeCache.txt" | sed "s/^/  $variant: /" | tee -a "$log"
  run ninja -C "$tree" -j "$jobs"
  run cmake --install "$tree" --prefix "$out/install/$variant"
}

plain() {
  build plain "$out/build/plain" "" ""
}

instrumented() {
  # The pipeline's flags (pgo/core/toolchain.py): atomic counters for the server's threads, and .gcda
  # names relative to the build tree, so the optimised build in the same tree finds them.
  build instrumented "$pgo_tree" \
    "-fprofile-generate=$profile -fprofile-update=prefer-atomic -fprofile-prefix-path=$pgo_tree" \
    "-fprofile-generate=$profile"
}

train() {
  [[ -x $out/install/instrumented/bin/mariadbd ]] || die "no instrumented build in $out/install: run step instrumented"
  rm -rf "$profile"
  mkdir -p "$profile"
  local command=() word
  for word in "${training[@]}"; do
    word=${word//\{install\}/$out/install/instrumented}
    command+=("${word//\{profile\}/$profile}")
  done
  echo "\$ ${command[*]}" >>"$log"
  "${command[@]}" 2>&1 | tee -a "$log" || die "step train failed: the training command (whole log: $log)"
  local gcda
  gcda=$(find "$profile" -name '*.gcda' | wc -l)
  [[ $gcda -gt 0 ]] || die "the training wrote no .gcda files into $profile: did the server shut down cleanly?"
  echo "  train: $gcda .gcda files in $profile" | tee -a "$log"
}

optimized() {
  # No PGO build without its profile: the server's own objects must have counters. A mismatch is
  # counted, not an error (GCC's default), and so is an object without profile (-Wmissing-profile).
  compgen -G "$profile/sql#*.gcda" >/dev/null || die "no profile of sql/ in $profile: run step train"
  build optimized "$pgo_tree" \
    "-fprofile-use=$profile -fprofile-correction -fprofile-partial-training -fprofile-prefix-path=$pgo_tree \
     -Wno-error=coverage-mismatch -Wmissing-profile" ""
  # Objects of the server's hot directories compiled without a profile lose the gain silently.
  local missing hot mismatch
  missing=$(grep -c "profile count data file not found" "$log" || true)
  hot=$(grep "profile count data file not found" "$log" | grep -c -E "/(sql|storage#innobase|mysys|strings)#" || true)
  mismatch=$(grep -c "\[-Wcoverage-mismatch\]" "$log" || true)
  echo "  optimized: $missing objects without profile ($hot of sql, innobase, mysys, strings)," \
    "$mismatch coverage-mismatch warnings" | tee -a "$log"
}

steps=("$step")
[[ $step != all ]] || steps=(plain instrumented train optimized)
for current in "${steps[@]}"; do
  log=$out/logs/$current.log
  : >"$log"
  echo "== $current ($(date +%H:%M:%S))"
  SECONDS=0
  "$current"
  echo "== $current done in $SECONDS s (log: $log)"
done
installed=("$out"/install/*)
echo "installed: ${installed[*]}"
