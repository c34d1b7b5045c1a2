/* Copyright (c) 2026, the PGO pipeline authors

   This program is free software; you can redistribute it and/or modify
   it under the terms of the GNU General Public License as published by
   the Free Software Foundation; version 2 of the License.

   This program is distributed in the hope that it will be useful,
   but WITHOUT ANY WARRANTY; without even the implied warranty of
   MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE.  See the
   GNU General Public License for more details.

   You should have received a copy of the GNU General Public License
   along with this program; if not, write to the Free Software
   Foundation, Inc., 51 Franklin St, Fifth Floor, Boston, MA 02110-1335  USA */

#include <stddef.h>

#include "matrix.h"

const char *const engine_names[ENGINE_COUNT] = {"innodb", "myisam", "aria", "memory", "rocksdb"};
const char *const binlog_names[BINLOG_COUNT] = {"off", "statement", "mixed", "row"};
const char *const api_names[API_COUNT] = {"text", "prepared", "cursor", "nonblocking"};

const char *const engine_sql[ENGINE_COUNT] = {"InnoDB", "MyISAM", "Aria", "MEMORY", "ROCKSDB"};
/* "off" leaves the format alone: sql_log_bin=0 is what turns logging off. */
const char *const binlog_sql[BINLOG_COUNT] = {NULL, "STATEMENT", "MIXED", "ROW"};

/* MyRocks is a plugin (Debian: mariadb-plugin-rocksdb); configurations such as `minimal`
   build without it. */
const char *const engine_plugin[ENGINE_COUNT] = {NULL, NULL, NULL, NULL, "ha_rocksdb"};

const char *cell_refused(enum engine engine, enum binlog binlog)
{
    /* MyRocks logs its tables' changes as rows only: with binlog_format=STATEMENT every DML
       statement on them fails (errno 1665, "a storage engine limited to row-based logging").
       rocksdb_unsafe_for_binlog=ON would let it through, but MyRocks has no gap locks, so a
       statement a replica replays can change other rows than it did here: MyRocks users log
       rows (MIXED, MariaDB's default, logs rows for them too), and so does the training. The
       cells are left out and named in the report, not run in another format under their name. */
    if (engine == ENGINE_ROCKSDB && binlog == BINLOG_STATEMENT)
        return "MyRocks refuses statement-based binary logging (rocksdb_unsafe_for_binlog)";
    return NULL;
}
