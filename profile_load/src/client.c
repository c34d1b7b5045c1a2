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

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <errmsg.h>
#include <mysqld_error.h>

#include "client.h"

#define RESULT_COLUMNS 16
#define RESULT_WIDTH 1024

/* The errors that mean the server is gone, not that the SQL was wrong. */
static int client_error_is_server_gone(unsigned err)
{
    return err == CR_SERVER_GONE_ERROR || err == CR_SERVER_LOST ||
           err == CR_CONNECTION_ERROR || err == ER_SERVER_SHUTDOWN ||
           err == ER_CONNECTION_KILLED;
}

static void digest_bytes(uint64_t *digest, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        *digest ^= p[i];
        *digest *= 0x100000001b3u;
    }
}

static void digest_statement(struct client *c, const char *sql, const struct param *params,
                             int nparams)
{
    digest_bytes(&c->digest, sql, strlen(sql) + 1);
    for (int i = 0; i < nparams; i++) {
        if (params[i].type == PARAM_INT)
            digest_bytes(&c->digest, &params[i].i, sizeof params[i].i);
        else
            digest_bytes(&c->digest, params[i].s, strlen(params[i].s) + 1);
    }
}

static void print_params(const struct param *params, int nparams)
{
    if (nparams == 0)
        return;
    fprintf(stderr, "  parameters:");
    for (int i = 0; i < nparams; i++) {
        if (params[i].type == PARAM_INT)
            fprintf(stderr, " %lld", params[i].i);
        else
            fprintf(stderr, " '%s'", params[i].s);
    }
    fprintf(stderr, "\n");
}

static int report_error(unsigned err, const char *sqlstate, const char *message,
                        const char *sql, const struct param *params, int nparams)
{
    if (client_error_is_server_gone(err))
        fprintf(stderr, "profile_load: server died or went away: %s (errno %u)\n", message, err);
    else
        fprintf(stderr, "profile_load: SQL error: %s (errno %u, sqlstate %s)\n", message, err,
                sqlstate);
    fprintf(stderr, "  statement: %s\n", sql);
    print_params(params, nparams);
    return client_error_is_server_gone(err) ? EXIT_SERVER : EXIT_WORKLOAD;
}

static int report_mysql_error(struct client *c, const char *sql, const struct param *params,
                              int nparams)
{
    return report_error(mysql_errno(c->mysql), mysql_sqlstate(c->mysql), mysql_error(c->mysql),
                        sql, params, nparams);
}

static int report_stmt_error(MYSQL_STMT *stmt, const char *sql, const struct param *params,
                             int nparams)
{
    return report_error(mysql_stmt_errno(stmt), mysql_stmt_sqlstate(stmt),
                        mysql_stmt_error(stmt), sql, params, nparams);
}

static void keep_first_row(struct outcome *out, MYSQL_ROW row, unsigned columns)
{
    for (unsigned i = 0; i < columns && i < OUTCOME_COLUMNS; i++)
        snprintf(out->first_row[i], OUTCOME_WIDTH, "%s", row[i] ? row[i] : "");
}

/* Waits as the non-blocking API asks: for the socket and/or its timeout. */
static int wait_for_mysql(MYSQL *mysql, int status)
{
    struct pollfd pfd = {.fd = mysql_get_socket(mysql), .events = 0};
    if (status & MYSQL_WAIT_READ)
        pfd.events |= POLLIN;
    if (status & MYSQL_WAIT_WRITE)
        pfd.events |= POLLOUT;
    if (status & MYSQL_WAIT_EXCEPT)
        pfd.events |= POLLPRI;
    int timeout = (status & MYSQL_WAIT_TIMEOUT) ? (int)mysql_get_timeout_value_ms(mysql) : -1;
    int ready = poll(&pfd, 1, timeout);
    if (ready == 0)
        return MYSQL_WAIT_TIMEOUT;
    if (ready < 0)
        return status; /* EINTR: let the library ask again */
    int result = 0;
    if (pfd.revents & (POLLIN | POLLHUP | POLLERR))
        result |= MYSQL_WAIT_READ;
    if (pfd.revents & POLLOUT)
        result |= MYSQL_WAIT_WRITE;
    if (pfd.revents & POLLPRI)
        result |= MYSQL_WAIT_EXCEPT;
    return result;
}

/* Text protocol and non-blocking API send literal SQL: substitute the parameters. */
static char *interpolate(MYSQL *mysql, const char *sql, const struct param *params, int nparams)
{
    size_t size = strlen(sql) + 1;
    for (int i = 0; i < nparams; i++)
        size += params[i].type == PARAM_INT ? 24 : 2 * strlen(params[i].s) + 3;
    char *text = malloc(size);
    if (!text) {
        perror("profile_load");
        exit(EXIT_WORKLOAD);
    }
    char *out = text;
    int next = 0;
    for (const char *p = sql; *p; p++) {
        if (*p != '?' || next >= nparams) {
            *out++ = *p;
            continue;
        }
        const struct param *param = &params[next++];
        if (param->type == PARAM_INT) {
            out += sprintf(out, "%lld", param->i);
        } else {
            *out++ = '\'';
            out += mysql_real_escape_string(mysql, out, param->s, strlen(param->s));
            *out++ = '\'';
        }
    }
    *out = '\0';
    return text;
}

static int exec_text(struct client *c, const char *sql, const struct param *params, int nparams,
                     struct outcome *out)
{
    char *text = interpolate(c->mysql, sql, params, nparams);
    int rc = EXIT_OK;
    if (mysql_real_query(c->mysql, text, strlen(text))) {
        rc = report_mysql_error(c, text, NULL, 0);
        goto done;
    }
    if (mysql_field_count(c->mysql) == 0) {
        out->affected_rows = (long long)mysql_affected_rows(c->mysql);
        goto done;
    }
    MYSQL_RES *result = mysql_store_result(c->mysql);
    if (!result) {
        rc = report_mysql_error(c, text, NULL, 0);
        goto done;
    }
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(result)))
        if (out->rows++ == 0)
            keep_first_row(out, row, mysql_num_fields(result));
    mysql_free_result(result);
done:
    free(text);
    return rc;
}

static int exec_nonblocking(struct client *c, const char *sql, const struct param *params,
                            int nparams, struct outcome *out)
{
    char *text = interpolate(c->mysql, sql, params, nparams);
    int rc = EXIT_OK;
    int err;
    int status = mysql_real_query_start(&err, c->mysql, text, strlen(text));
    while (status)
        status = mysql_real_query_cont(&err, c->mysql, wait_for_mysql(c->mysql, status));
    if (err) {
        rc = report_mysql_error(c, text, NULL, 0);
        goto done;
    }
    if (mysql_field_count(c->mysql) == 0) {
        out->affected_rows = (long long)mysql_affected_rows(c->mysql);
        goto done;
    }
    MYSQL_RES *result;
    status = mysql_store_result_start(&result, c->mysql);
    while (status)
        status = mysql_store_result_cont(&result, c->mysql, wait_for_mysql(c->mysql, status));
    if (!result) {
        rc = report_mysql_error(c, text, NULL, 0);
        goto done;
    }
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(result)))
        if (out->rows++ == 0)
            keep_first_row(out, row, mysql_num_fields(result));
    status = mysql_free_result_start(result);
    while (status)
        status = mysql_free_result_cont(result, wait_for_mysql(c->mysql, status));
done:
    free(text);
    return rc;
}

/* Prepared statements are kept per connection, as an application would, so repeated
   statements exercise COM_STMT_EXECUTE rather than a prepare for every row. */
static MYSQL_STMT *prepared(struct client *c, const char *sql, int *rc)
{
    for (int i = 0; i < c->cached; i++)
        if (strcmp(c->cache[i].sql, sql) == 0)
            return c->cache[i].stmt;

    MYSQL_STMT *stmt = mysql_stmt_init(c->mysql);
    if (!stmt) {
        *rc = report_mysql_error(c, sql, NULL, 0);
        return NULL;
    }
    if (c->api == API_CURSOR) {
        unsigned long cursor = CURSOR_TYPE_READ_ONLY;
        unsigned long prefetch = 8; /* several fetch round trips per result */
        mysql_stmt_attr_set(stmt, STMT_ATTR_CURSOR_TYPE, &cursor);
        mysql_stmt_attr_set(stmt, STMT_ATTR_PREFETCH_ROWS, &prefetch);
    }
    if (mysql_stmt_prepare(stmt, sql, strlen(sql))) {
        *rc = report_stmt_error(stmt, sql, NULL, 0);
        mysql_stmt_close(stmt);
        return NULL;
    }
    if (c->cached == CACHED_STATEMENTS) {
        mysql_stmt_close(c->cache[0].stmt);
        free(c->cache[0].sql);
        memmove(&c->cache[0], &c->cache[1], sizeof c->cache[0] * (CACHED_STATEMENTS - 1));
        c->cached--;
    }
    c->cache[c->cached].sql = strdup(sql);
    c->cache[c->cached].stmt = stmt;
    c->cached++;
    return stmt;
}

static int exec_prepared(struct client *c, const char *sql, const struct param *params,
                         int nparams, struct outcome *out)
{
    int rc = EXIT_OK;
    MYSQL_STMT *stmt = prepared(c, sql, &rc);
    if (!stmt)
        return rc;
    if (mysql_stmt_param_count(stmt) != (unsigned long)nparams) {
        fprintf(stderr, "profile_load: statement has %lu placeholders but %d parameters\n"
                        "  statement: %s\n", mysql_stmt_param_count(stmt), nparams, sql);
        return EXIT_WORKLOAD;
    }

    MYSQL_BIND *binds = calloc(nparams ? nparams : 1, sizeof *binds);
    if (!binds) {
        perror("profile_load");
        exit(EXIT_WORKLOAD);
    }
    for (int i = 0; i < nparams; i++) {
        if (params[i].type == PARAM_INT) {
            binds[i].buffer_type = MYSQL_TYPE_LONGLONG;
            binds[i].buffer = (void *)&params[i].i;
        } else {
            binds[i].buffer_type = MYSQL_TYPE_STRING;
            binds[i].buffer = (void *)params[i].s;
            binds[i].buffer_length = strlen(params[i].s);
        }
    }
    int failed = (nparams && mysql_stmt_bind_param(stmt, binds)) || mysql_stmt_execute(stmt);
    free(binds);
    if (failed)
        return report_stmt_error(stmt, sql, params, nparams);

    unsigned columns = mysql_stmt_field_count(stmt);
    if (columns == 0) {
        out->affected_rows = (long long)mysql_stmt_affected_rows(stmt);
        return EXIT_OK;
    }
    if (columns > RESULT_COLUMNS) {
        fprintf(stderr, "profile_load: more than %d result columns\n  statement: %s\n",
                RESULT_COLUMNS, sql);
        return EXIT_WORKLOAD;
    }

    /* Fetching every column as a string makes the library convert from the binary row. */
    static char buffers[RESULT_COLUMNS][RESULT_WIDTH];
    static unsigned long lengths[RESULT_COLUMNS];
    static my_bool nulls[RESULT_COLUMNS], errors[RESULT_COLUMNS];
    MYSQL_BIND results[RESULT_COLUMNS];
    memset(results, 0, sizeof results);
    for (unsigned i = 0; i < columns; i++) {
        results[i].buffer_type = MYSQL_TYPE_STRING;
        results[i].buffer = buffers[i];
        results[i].buffer_length = RESULT_WIDTH - 1;
        results[i].length = &lengths[i];
        results[i].is_null = &nulls[i];
        results[i].error = &errors[i];
    }
    if (mysql_stmt_bind_result(stmt, results))
        return report_stmt_error(stmt, sql, params, nparams);
    /* Without a cursor the whole result is buffered client side; with one, rows come in
       prefetch-sized batches from the server. */
    if (c->api == API_PREPARED && mysql_stmt_store_result(stmt))
        return report_stmt_error(stmt, sql, params, nparams);

    int fetched;
    while ((fetched = mysql_stmt_fetch(stmt)) == 0 || fetched == MYSQL_DATA_TRUNCATED) {
        if (out->rows++ > 0)
            continue;
        for (unsigned i = 0; i < columns && i < OUTCOME_COLUMNS; i++) {
            size_t len = nulls[i] ? 0 : lengths[i];
            if (len >= OUTCOME_WIDTH)
                len = OUTCOME_WIDTH - 1;
            memcpy(out->first_row[i], buffers[i], len);
            out->first_row[i][len] = '\0';
        }
    }
    if (fetched != MYSQL_NO_DATA)
        rc = report_stmt_error(stmt, sql, params, nparams);
    mysql_stmt_free_result(stmt);
    return rc;
}

int client_exec(struct client *c, const char *sql, const struct param *params, int nparams,
                struct outcome *out)
{
    struct outcome ignored;
    if (!out)
        out = &ignored;
    memset(out, 0, sizeof *out);
    c->statements++;
    digest_statement(c, sql, params, nparams);
    switch (c->api) {
    case API_PREPARED:
    case API_CURSOR:
        return exec_prepared(c, sql, params, nparams, out);
    case API_NONBLOCKING:
        return exec_nonblocking(c, sql, params, nparams, out);
    default:
        return exec_text(c, sql, params, nparams, out);
    }
}

int client_connect(struct client *c, const struct target *t, enum api api, int server_was_up)
{
    memset(c, 0, sizeof *c);
    c->api = api;
    c->digest = 0xcbf29ce484222325u;
    c->mysql = mysql_init(NULL);
    if (!c->mysql) {
        fprintf(stderr, "profile_load: mysql_init failed: out of memory\n");
        exit(EXIT_WORKLOAD);
    }
    unsigned protocol = MYSQL_PROTOCOL_SOCKET; /* never fall back to TCP */
    unsigned timeout = 10;
    mysql_options(c->mysql, MYSQL_OPT_PROTOCOL, &protocol);
    mysql_options(c->mysql, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
    mysql_options(c->mysql, MYSQL_SET_CHARSET_NAME, t->charset ? t->charset : "utf8mb4");

    MYSQL *connected;
    if (api == API_NONBLOCKING) {
        mysql_options(c->mysql, MYSQL_OPT_NONBLOCK, 0);
        int status = mysql_real_connect_start(&connected, c->mysql, "localhost", t->user,
                                              t->password, t->database, 0, t->socket, 0);
        while (status)
            status = mysql_real_connect_cont(&connected, c->mysql,
                                             wait_for_mysql(c->mysql, status));
    } else {
        connected = mysql_real_connect(c->mysql, "localhost", t->user, t->password,
                                       t->database, 0, t->socket, 0);
    }
    if (connected)
        return EXIT_OK;
    fprintf(stderr, "profile_load: %scannot connect to the server at socket %s: %s (errno %u)\n",
            server_was_up ? "server died or went away: " : "", t->socket,
            mysql_error(c->mysql), mysql_errno(c->mysql));
    mysql_close(c->mysql);
    c->mysql = NULL;
    return EXIT_SERVER;
}

void client_close(struct client *c)
{
    for (int i = 0; i < c->cached; i++) {
        mysql_stmt_close(c->cache[i].stmt);
        free(c->cache[i].sql);
    }
    c->cached = 0;
    if (c->mysql)
        mysql_close(c->mysql);
    c->mysql = NULL;
}
