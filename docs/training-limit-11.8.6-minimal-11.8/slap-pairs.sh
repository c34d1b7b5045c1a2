#!/bin/bash
# An unseen workload for issue 16, goal 4 (an experiment, not a product option): mariadb-slap's
# auto-generated SQL against two installed builds, interleaved pairs (A B, B A, ...), one client.
#
#   slap-pairs.sh BASELINE CANDIDATE PAIRS QUERIES LOAD_TYPE...
#
# LOAD_TYPE: mariadb-slap's --auto-generate-sql-load-type (key, update, mixed, read, write), or
# `join`: our own join-heavy, utf8mb4 load (join-create.sql and join-query.sql beside this
# script: four InnoDB tables of 3,000 to 90,000 rows, six reporting queries with 2- to 4-way
# joins, semi-joins, GROUP BY and ORDER BY on utf8mb4_unicode_ci names).
# Each run: mariadb-slap creates its own schema (the generated one: an auto-increment key,
# integer and varchar columns, in the server's default character set), runs QUERIES statements
# on one connection, drops it, and reports the seconds of the query part. Prints one line per
# pair (seconds A, B, A/B) and, per load type, B's speedup in statements per second with its 95%
# interval and sign test, from pgo bench's own statistics (pgo/bench/stats.py paired_ratio).
# Servers as pgo bench starts them: CPU 0, the client on CPU 1, pgo bench's server options
# (pgo/bench/server.py common_options, for one client).
set -euo pipefail
[[ $# -ge 5 ]] || { sed -n '2,/^set -/{/^#/s/^# \{0,1\}//p}' "$0" >&2; exit 2; }
a=$(realpath "$1") b=$(realpath "$2") pairs=$3 queries=$4
shift 4
here=$(realpath "$(dirname "$0")")
export PYTHONPATH
PYTHONPATH=$(realpath "$here/../..")
read -ra options < <(python3 -c "from pgo.bench.server import common_options
print(' '.join(common_options('512M', 1, [])))")
work=$(mktemp -d /tmp/slap-pairs.XXXXXX)
trap 'for s in A B; do mariadb-admin --socket="$work/$s.sock" -uroot shutdown 2>/dev/null || true; done; rm -rf "$work"' EXIT

serve() {  # LABEL BASEDIR
  "$2/scripts/mariadb-install-db" --no-defaults --basedir="$2" --datadir="$work/$1" \
    --auth-root-authentication-method=normal --user=root >"$work/$1-install.log" 2>&1
  taskset -c 0 "$2/bin/mariadbd" --no-defaults --basedir="$2" --datadir="$work/$1" --user=root \
    --socket="$work/$1.sock" --skip-networking --log-error="$work/$1.err" "${options[@]}" &
  for _ in $(seq 600); do
    mariadb-admin --socket="$work/$1.sock" -uroot ping >/dev/null 2>&1 && return 0; sleep 0.2
  done
  echo "slap-pairs: server $1 ($2) did not start: $(tail -n 1 "$work/$1.err")" >&2; exit 1
}

slap() {  # LABEL LOAD_TYPE -> seconds
  local load=(--auto-generate-sql --auto-generate-sql-add-autoincrement --auto-generate-sql-load-type="$2")
  # The statistics once the tables are loaded, before the timed part, so every run plans alike.
  [[ $2 == join ]] && load=(--create="$here/join-create.sql" --query="$here/join-query.sql" --delimiter=';'
    --pre-query="ANALYZE TABLE customer, product, purchase, purchase_line")
  taskset -c 1 mariadb-slap --socket="$work/$1.sock" -uroot --concurrency=1 --iterations=1 \
    "${load[@]}" --number-of-queries="$queries" |
    sed -n 's/.*Average number of seconds to run all queries: \([0-9.]*\) seconds.*/\1/p'
}

serve A "$a"
serve B "$b"
echo "A: $("$a/bin/mariadbd" --version)"
echo "B: $("$b/bin/mariadbd" --version)"
echo "Server options: ${options[*]}"
echo "Machine: $(python3 -c "from pgo.bench.report import describe_machine
from pgo.bench.runner import machine
print(describe_machine(machine()))")"
for load in "$@"; do
  slap A "$load" >/dev/null; slap B "$load" >/dev/null          # warm-up
  times_a=() times_b=()
  for ((i = 1; i <= pairs; i++)); do
    if ((i % 2)); then ta=$(slap A "$load"); tb=$(slap B "$load")
    else tb=$(slap B "$load"); ta=$(slap A "$load"); fi
    times_a+=("$ta") times_b+=("$tb")
    echo "$load pair $i: A $ta s, B $tb s, A/B $(python3 -c "print(f'{$ta / $tb:.4f}')")"
  done
  python3 - "$load" "${times_a[*]}" "${times_b[*]}" <<'EOF'
import sys
from pgo.bench.stats import paired_ratio
load, seconds_a, seconds_b = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
# Throughput, statements per second: the ratio pgo bench reports (B/A > 1: B is faster).
r = paired_ratio([1 / float(t) for t in seconds_a], [1 / float(t) for t in seconds_b])
faster = sum(float(b) < float(a) for a, b in zip(seconds_a, seconds_b))
print(f"{load}: B speedup {r['ratio']:.3f} [{r['low']:.3f}, {r['high']:.3f}], {r['n']} pairs, "
      f"B faster in {faster}, sign test p {r['p_sign']:.3f}")
EOF
done
