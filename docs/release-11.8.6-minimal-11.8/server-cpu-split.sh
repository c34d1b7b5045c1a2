#!/bin/bash
# Where one client's transaction time goes: the user and kernel CPU time of mariadbd
# (/proc/PID/stat, in clock ticks) under single-thread sysbench, 20 s per workload, server on
# CPU 0 and sysbench on CPU 1 as `pgo bench` places them. An experiment of the report beside
# it, not a product tool. Usage: server-cpu-split.sh STAGED_BASEDIR
set -e
S=$1; D=$(mktemp -d); SOCK=$D/sock
$S/scripts/mariadb-install-db --no-defaults --basedir=$S --datadir=$D/data --auth-root-authentication-method=normal >/dev/null 2>&1
taskset -c 0 $S/bin/mariadbd --no-defaults --basedir=$S --datadir=$D/data --socket=$SOCK --skip-networking --innodb-buffer-pool-size=512M --innodb-flush-log-at-trx-commit=2 --user=root > $D/err.log 2>&1 &
PID=$!
for i in $(seq 60); do [ -S $SOCK ] && break; sleep 0.5; done
$S/bin/mariadb --no-defaults -S $SOCK -uroot -e "create database sbtest"
SB="sysbench --db-driver=mysql --mysql-socket=$SOCK --mysql-user=root --tables=4 --table-size=100000"
$SB oltp_read_only prepare >/dev/null
tick=$(getconf CLK_TCK)
for w in oltp_point_select oltp_read_only; do
  taskset -c 1 $SB --threads=1 --time=5 $w run >/dev/null
  read u1 s1 < <(awk '{print $14, $15}' /proc/$PID/stat)
  tps=$(taskset -c 1 $SB --threads=1 --time=20 $w run | awk '/transactions:/ {gsub(/[()]/,"",$3); print $3}')
  read u2 s2 < <(awk '{print $14, $15}' /proc/$PID/stat)
  echo "$w tps=$tps server_user_ticks=$((u2-u1)) server_sys_ticks=$((s2-s1)) (of $((20*tick))) sys_share=$(python3 -c "print(round(($s2-$s1)/(($u2-$u1)+($s2-$s1)),3))")"
done
kill $PID; wait $PID 2>/dev/null || true; rm -rf $D
