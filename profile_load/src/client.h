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

/* One connection that runs statements through one client API and counts them. */
#ifndef PROFILE_LOAD_CLIENT_H
#define PROFILE_LOAD_CLIENT_H

#include <stdint.h>

#include <mysql.h>

#include "matrix.h"

struct target {
    const char *socket;
    const char *user;
    const char *password;
    const char *database; /* NULL: none */
    const char *charset;  /* connection character set; NULL: utf8mb4 */
};

enum param_type { PARAM_INT, PARAM_TEXT };

struct param {
    enum param_type type;
    long long i;
    const char *s;
};

#define OUTCOME_COLUMNS 4
#define OUTCOME_WIDTH 64

struct outcome {
    long long affected_rows;
    long long rows;
    char first_row[OUTCOME_COLUMNS][OUTCOME_WIDTH]; /* "" for NULL or missing */
};

#define CACHED_STATEMENTS 64

struct client {
    MYSQL *mysql;
    enum api api;
    struct {
        char *sql;
        MYSQL_STMT *stmt;
    } cache[CACHED_STATEMENTS];
    int cached;
    long long statements;
    uint64_t digest; /* FNV-1a over every template and parameter run */
};

/* Parameters and error flow for client_exec(): run(..., PARAMS(P_INT(7), P_TEXT("x"))). */
#define P_INT(v) ((struct param){.type = PARAM_INT, .i = (v)})
#define P_TEXT(v) ((struct param){.type = PARAM_TEXT, .s = (v)})
#define PARAMS(...) (const struct param[]){__VA_ARGS__}, \
    (int)(sizeof((const struct param[]){__VA_ARGS__}) / sizeof(struct param))
#define TRY(call) do { int rc_ = (call); if (rc_ != EXIT_OK) return rc_; } while (0)

/* Return EXIT_OK, or EXIT_SERVER after printing why (with "server died" when it vanished). */
int client_connect(struct client *c, const struct target *t, enum api api, int had_connected);

/* Run one statement; '?' in sql are placeholders for params. Prints and returns
   EXIT_WORKLOAD on an SQL error, EXIT_SERVER when the server died or went away. */
int client_exec(struct client *c, const char *sql, const struct param *params, int nparams,
                struct outcome *out);

void client_close(struct client *c);

#endif
