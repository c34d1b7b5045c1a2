#!/bin/bash
# The control experiment of the training report (not a product option): train an
# instrumented server on the benchmark itself, to learn the most any profile can give.
#
#   train-on-sysbench.sh INSTRUMENTED_INSTALL PROFILE_DIR SECONDS
#
# Only the benchmark's own statements reach the profile: the bootstrap and sysbench's
# table load run in a first server process whose counters go elsewhere (GCOV_PREFIX
# prepends a directory to the absolute .gcda paths); a second process runs
# oltp_point_select, oltp_read_only and oltp_read_write for SECONDS each on one thread,
# with the benchmark's server options (pgo/bench/server.py), and shuts down cleanly.
set -euo pipefail
install=$(realpath "$1") profile=$2 seconds=$3
work=$(mktemp -d /tmp/train-sysbench.XXXXXX)
sock=$work/s.sock
opts=(--no-defaults --basedir="$install" --datadir="$work/data" --socket="$sock"
      --skip-networking --user=root --log-error="$work/err.log"
      --innodb-buffer-pool-size=512M --innodb-buffer-pool-load-at-startup=OFF
      --innodb-buffer-pool-dump-at-shutdown=OFF --innodb-log-file-size=256M
      --innodb-flush-log-at-trx-commit=2 --max-connections=200
      --max-prepared-stmt-count=1048576)
sb=(sysbench --db-driver=mysql --mysql-socket="$sock" --mysql-user=root --mysql-db=sbtest
    --tables=4 --table-size=100000)

serve() {  # start mariadbd in the background, wait until it answers
  taskset -c 0 "$install/bin/mariadbd" "${opts[@]}" & pid=$!
  for _ in $(seq 600); do
    mariadb-admin --socket="$sock" -uroot ping >/dev/null 2>&1 && return 0; sleep 0.2
  done
  echo "server did not start" >&2; exit 1
}
stop() {  # clean shutdown: the counters are written at exit
  mariadb-admin --socket="$sock" -uroot shutdown
  wait "$pid" || { echo "server exit status $?" >&2; exit 1; }
}

export GCOV_PREFIX=$work/setup-counters
"$install/scripts/mariadb-install-db" --no-defaults --basedir="$install" \
  --datadir="$work/data" --auth-root-authentication-method=normal --user=root >"$work/install.log" 2>&1
serve
mariadb --socket="$sock" -uroot -e "CREATE DATABASE sbtest"
taskset -c 1 "${sb[@]}" --rand-seed=1 oltp_common prepare >/dev/null
stop
unset GCOV_PREFIX

serve
for workload in oltp_point_select oltp_read_only oltp_read_write; do
  echo "training on $workload for $seconds s"
  taskset -c 1 "${sb[@]}" --threads=1 --time="$seconds" "$workload" run | grep -E "transactions:"
done
stop
rm -rf "$work"
echo "profile in $profile: $(ls "$profile" | wc -l) .gcda files"
