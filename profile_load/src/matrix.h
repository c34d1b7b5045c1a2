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

/* The workload matrix: every pass runs one (engine, binlog format, client API) cell.
   Also the version and exit codes that all parts of the program share. */
#ifndef PROFILE_LOAD_MATRIX_H
#define PROFILE_LOAD_MATRIX_H

/* Bump when the statements change: an archived profile records which workload made it. */
#define PROFILE_LOAD_VERSION "6"

enum exit_code {
    EXIT_OK = 0,
    EXIT_WORKLOAD = 1, /* unexpected SQL error or a check on the data failed */
    EXIT_USAGE = 2,
    EXIT_SERVER = 3    /* install, start, connect, crash or unclean shutdown */
};

enum engine { ENGINE_INNODB, ENGINE_MYISAM, ENGINE_ARIA, ENGINE_MEMORY, ENGINE_ROCKSDB,
              ENGINE_COUNT };
enum binlog { BINLOG_OFF, BINLOG_STATEMENT, BINLOG_MIXED, BINLOG_ROW, BINLOG_COUNT };
enum api { API_TEXT, API_PREPARED, API_CURSOR, API_NONBLOCKING, API_COUNT };

extern const char *const engine_names[ENGINE_COUNT];
extern const char *const binlog_names[BINLOG_COUNT];
extern const char *const api_names[API_COUNT];

/* The SQL spelling: ENGINE=... and binlog_format=... */
extern const char *const engine_sql[ENGINE_COUNT];
extern const char *const binlog_sql[BINLOG_COUNT];

/* The library of an engine that is a plugin rather than part of every server (ha_rocksdb for
   RocksDB), without ".so"; NULL for the engines every server has. */
extern const char *const engine_plugin[ENGINE_COUNT];

/* Why an engine's cell of a binlog format cannot run on any server, or NULL when it can. */
const char *cell_refused(enum engine engine, enum binlog binlog);

#endif
