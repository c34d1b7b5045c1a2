#!/bin/bash
# An unseen workload for issue 16, goal 4 (an experiment, not a product option): mariadb-slap's
# auto-generated SQL against two installed builds, interleaved pairs (A B, B A, ...), one client.
#
#   slap-pairs.sh BASELINE CANDIDATE PAIRS QUERIES LOAD_TYPE...
#
# LOAD_TYPE: mariadb-slap's --auto-generate-sql-load-type (key, update, mixed, read, write).
# Each run: mariadb-slap creates its own table (an auto-increment key, integer and varchar
# columns, in the server's default character set), runs QUERIES statements on one connection,
# drops it, and reports the seconds of the query part. Prints one line per pair (seconds A, B,
# A/B) and, per load type, the geometric mean of A/B (B's speedup) with a 95% t-interval.
# Servers as pgo bench starts them: CPU 0, the client on CPU 1, the same options.
set -euo pipefail
[[ $# -ge 5 ]] || { sed -n '2,/^set -/{/^#/s/^# \{0,1\}//p}' "$0" >&2; exit 2; }
a=$(realpath "$1") b=$(realpath "$2") pairs=$3 queries=$4
shift 4
work=$(mktemp -d /tmp/slap-pairs.XXXXXX)
trap 'for s in A B; do mariadb-admin --socket="$work/$s.sock" -uroot shutdown 2>/dev/null || true; done; rm -rf "$work"' EXIT

serve() {  # LABEL BASEDIR
  "$2/scripts/mariadb-install-db" --no-defaults --basedir="$2" --datadir="$work/$1" \
    --auth-root-authentication-method=normal --user=root >"$work/$1-install.log" 2>&1
  taskset -c 0 "$2/bin/mariadbd" --no-defaults --basedir="$2" --datadir="$work/$1" --user=root \
    --socket="$work/$1.sock" --skip-networking --log-error="$work/$1.err" \
    --innodb-buffer-pool-size=512M --innodb-buffer-pool-load-at-startup=OFF \
    --innodb-buffer-pool-dump-at-shutdown=OFF --innodb-log-file-size=256M \
    --innodb-flush-log-at-trx-commit=2 --max-connections=51 &
  for _ in $(seq 600); do
    mariadb-admin --socket="$work/$1.sock" -uroot ping >/dev/null 2>&1 && return 0; sleep 0.2
  done
  echo "slap-pairs: server $1 ($2) did not start: $(tail -n 1 "$work/$1.err")" >&2; exit 1
}

slap() {  # LABEL LOAD_TYPE -> seconds
  taskset -c 1 mariadb-slap --socket="$work/$1.sock" -uroot --concurrency=1 --iterations=1 \
    --auto-generate-sql --auto-generate-sql-add-autoincrement --auto-generate-sql-load-type="$2" \
    --number-of-queries="$queries" |
    sed -n 's/.*Average number of seconds to run all queries: \([0-9.]*\) seconds.*/\1/p'
}

serve A "$a"
serve B "$b"
echo "A: $("$a/bin/mariadbd" --version)"
echo "B: $("$b/bin/mariadbd" --version)"
echo "Machine: $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1)"
for load in "$@"; do
  slap A "$load" >/dev/null; slap B "$load" >/dev/null          # warm-up
  ratios=()
  for ((i = 1; i <= pairs; i++)); do
    if ((i % 2)); then ta=$(slap A "$load"); tb=$(slap B "$load")
    else tb=$(slap B "$load"); ta=$(slap A "$load"); fi
    ratio=$(python3 -c "print(f'{$ta / $tb:.4f}')")
    ratios+=("$ratio")
    echo "$load pair $i: A $ta s, B $tb s, A/B $ratio"
  done
  python3 - "$load" "${ratios[@]}" <<'EOF'
import math, statistics, sys
from scipy import stats
load, logs = sys.argv[1], [math.log(float(r)) for r in sys.argv[2:]]
m, se = statistics.mean(logs), statistics.stdev(logs) / math.sqrt(len(logs))
t = stats.t.ppf(0.975, len(logs) - 1)
faster = sum(l > 0 for l in logs)
print(f"{load}: B speedup {math.exp(m):.3f} [{math.exp(m - t * se):.3f}, {math.exp(m + t * se):.3f}], "
      f"{len(logs)} pairs, B faster in {faster}")
EOF
done
