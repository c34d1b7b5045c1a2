#!/bin/sh
# Start the MariaDB server a package installed, query it, shut it down.
#   mariadb.sh tree BASEDIR   an unpacked bintar, or rpm payloads extracted under
#                             ROOT (BASEDIR ROOT/usr): a datadir made by the tree's
#                             own mariadb-install-db, a private socket, no defaults
#   mariadb.sh system         the Debian packages installed: their configuration, their
#                             datadir (made by the postinst), the server as user mysql
# Prints "version_comment: ..." for the caller to check the build's mark.
set -eu

work=$(mktemp -d /tmp/mariadb-smoke.XXXXXX)
server_pid=
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid"; wait "$server_pid" || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

case "${1:-}" in
  tree)
    base=$(cd "$2" && pwd)
    user=$(id -un)
    if [ -x "$base/sbin/mariadbd" ]; then
      # MariaDB's RPM layout: its compiled-in directories are the system's, so name the tree's.
      install_db=$base/bin/mariadb-install-db server=$base/sbin/mariadbd
      set -- --lc-messages-dir="$base/share/mysql" --plugin-dir="$(echo "$base"/lib*/mysql/plugin)"
    else
      install_db=$base/scripts/mariadb-install-db server=$base/bin/mariadbd
      set --
    fi
    echo "mariadb-install-db --basedir=$base"
    "$install_db" --no-defaults --basedir="$base" --datadir="$work/data" \
      --user="$user" --skip-test-db >"$work/install-db.log" 2>&1 || { cat "$work/install-db.log"; exit 1; }
    "$server" --no-defaults --basedir="$base" --datadir="$work/data" --user="$user" "$@" \
      --socket="$work/mysql.sock" --skip-networking --pid-file="$work/mariadbd.pid" \
      --log-error="$work/error.log" &
    server_pid=$!
    client() { program=$1; shift; "$base/bin/$program" --no-defaults --socket="$work/mysql.sock" -uroot "$@"; }
    ;;
  system)
    mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld
    chown mysql "$work"
    mariadbd --user=mysql --log-error="$work/error.log" &
    server_pid=$!
    client() { "$@"; }
    ;;
  *) echo "usage: mariadb.sh tree BASEDIR | system" >&2; exit 2 ;;
esac
log=$work/error.log

tries=0
until client mariadb-admin ping >/dev/null 2>&1; do
  tries=$((tries + 1))
  if ! kill -0 "$server_pid" 2>/dev/null || [ $tries -gt 120 ]; then
    echo "the server did not come up:"; cat "$log"; exit 1
  fi
  sleep 0.5
done
echo "server up (pid $server_pid) after $tries tries"

client mariadb -e "
  CREATE DATABASE proof;
  CREATE TABLE proof.t (id INT PRIMARY KEY, name VARCHAR(20), KEY (name)) ENGINE=InnoDB;
  INSERT INTO proof.t VALUES (1, 'one'), (2, 'two'), (3, 'three');
  UPDATE proof.t SET name = 'drei' WHERE id = 3;
  SELECT COUNT(*), SUM(id), GROUP_CONCAT(name ORDER BY id) FROM proof.t;
  SELECT ENGINE, TABLE_ROWS > 0 FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'proof';
  DROP DATABASE proof;
  SELECT @@version;"
printf 'version_comment: '
client mariadb -N -B -e "SELECT @@version_comment"

client mariadb-admin shutdown
status=0
wait "$server_pid" || status=$?
server_pid=
if [ $status -ne 0 ]; then
  echo "the server exited with status $status:"; cat "$log"; exit 1
fi
echo "server shut down cleanly"
