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

/* The steady state of a service.

   The matrix passes are mostly setup: every pass creates, loads, alters and drops its
   tables and reads them a few hundred times. A server in production does the opposite: its
   tables exist, and it repeats short transactions on long-lived connections millions of
   times. GCC decides what is hot from the counts (an object's hot threshold is its largest
   counter / 10000, and blocks no training run reached are laid out as cold), so the paths
   a service repeats must also be the paths the training repeats most. This phase does that:
   two tables (one of the server's default character set and collation, latin1 in 10.x, and
   one of the utf8mb4 collation that older tables have), loaded once, then many transactions
   (primary-key and secondary-index reads, ranges, aggregates, sorts, DISTINCT, joins, locking
   reads, updates, inserts, deletes) on two long-lived connections, one on the text protocol
   and one on server-side prepared statements with another connection character set. */
#include <stdio.h>
#include <string.h>

#include "prng.h"
#include "steady.h"
#include "workload.h"

enum table { TABLE_DEFAULT_CHARSET, TABLE_UTF8MB4, TABLE_COUNT };

static const char *const table_name[TABLE_COUNT] = {"steady_account", "steady_account_u8"};
/* The first table has what a table made without a CHARSET clause gets on a server of default
   settings: its default character set and collation (latin1_swedish_ci up to 11.5, the UCA
   14.0.0 utf8mb4_uca1400_ai_ci from 11.6, so in the 11.8 line). Version 3 made both tables
   utf8mb4, and left 10.x's latin1 hashing and sort keys untrained. The second keeps the
   utf8mb4 collation of the tables of a service upgraded from 10.x. */
#define LEGACY_COLLATION "utf8mb4_general_ci"

/* Names that fit latin1 as well as utf8mb4, and names that only fit utf8mb4. */
static const char *const holders[TABLE_COUNT][8] = {
    {"Anders Jensen", "José Núñez", "Zoë Müller", "Brian O'Neil", "Eva Sørensen",
     "Pierre Lefèvre", "Maria Rossi", "Åsa Lindqvist"},
    {"山田 太郎", "Иван Петров", "Γιώργος Παππάς", "Łukasz Wróbel", "Nguyễn Văn An",
     "김민수", "Çağla Yılmaz", "Zoë Müller"}};
static const char *const cities[] = {"Aarhus", "Lisboa", "Zürich", "Dublin", "Bergen",
                                     "Lyon", "Napoli", "Malmö", "Tampere", "Graz"};
static const char *const kinds[] = {"debit", "credit", "fee", "refund"};
/* Account numbers: IBANs of 27 to 33 characters in a CHAR(34). A sort key of a fixed-width
   column runs over its whole value, so a sort's key loops see long strings as well as short
   names: a training of only short keys makes GCC peel the loop for them and leaves it
   rolled for long ones (version 4: my_strnxfrm_simple_internal peeled 12 times). */
static const struct { const char *country; int digits; } iban_formats[] = {
    {"FR", 23}, {"IT", 23}, {"PL", 24}, {"HU", 24}, {"MT", 27}, {"LC", 28}, {"RU", 29}};

#define COUNT(array) ((unsigned)(sizeof(array) / sizeof((array)[0])))
#define LOAD_BATCH 50

enum query {
    Q_POINT, Q_RANGE, Q_SUM, Q_SORTED, Q_DISTINCT, Q_BRANCH, Q_LOCK, Q_DEBIT, Q_CREDIT,
    Q_MOVE, Q_JOIN, Q_COUNT
};

static const char *const query_format[Q_COUNT] = {
    [Q_POINT] = "SELECT holder, balance FROM %s WHERE id = ?",
    [Q_RANGE] = "SELECT id, holder, balance FROM %s WHERE id BETWEEN ? AND ?",
    [Q_SUM] = "SELECT SUM(balance) FROM %s WHERE id BETWEEN ? AND ?",
    [Q_SORTED] = "SELECT holder, city FROM %s WHERE id BETWEEN ? AND ? ORDER BY holder, iban",
    [Q_DISTINCT] = "SELECT DISTINCT city FROM %s WHERE id BETWEEN ? AND ? ORDER BY city",
    [Q_BRANCH] = "SELECT id, balance FROM %s WHERE branch = ? ORDER BY balance DESC LIMIT 5",
    [Q_LOCK] = "SELECT balance FROM %s WHERE id = ? FOR UPDATE",
    [Q_DEBIT] = "UPDATE %s SET balance = balance - ? WHERE id = ?",
    [Q_CREDIT] = "UPDATE %s SET balance = balance + ?, memo = ? WHERE id = ?",
    [Q_MOVE] = "UPDATE %s SET branch = ? WHERE id = ?",
    [Q_JOIN] = "SELECT a.holder, COUNT(*), SUM(e.amount) FROM %s a"
               " JOIN steady_entry e ON e.account_id = a.id"
               " WHERE a.id BETWEEN ? AND ? GROUP BY a.id, a.holder",
};

#define BRANCHES 40

struct steady {
    struct client connection[2]; /* text protocol; prepared statements */
    struct client *c;            /* the current transaction's */
    uint64_t prng;
    int rows;
    long long oldest_entry; /* the entries from this id on are still in the table */
    long long changes;                  /* makes every memo a new value */
    char sql[TABLE_COUNT][Q_COUNT][256];
    char collation[TABLE_COUNT][OUTCOME_WIDTH];
};

static int exec(struct steady *s, const char *sql, const struct param *params, int n,
                struct outcome *out)
{
    return client_exec(s->c, sql, params, n, out);
}

static int expect(long long got, long long want, const char *what)
{
    if (got == want)
        return EXIT_OK;
    fprintf(stderr, "profile_load: steady state check failed: %s: %lld rows, expected %lld\n",
            what, got, want);
    return EXIT_WORKLOAD;
}

static int account(struct steady *s)
{
    return 1 + (int)prng_below(&s->prng, (unsigned)s->rows);
}

static int create_tables(struct steady *s)
{
    char sql[768];
    struct outcome out;
    TRY(exec(s, "SELECT @@character_set_server, @@collation_server", NULL, 0, &out));
    snprintf(s->collation[TABLE_DEFAULT_CHARSET], OUTCOME_WIDTH, "%s", out.first_row[1]);
    snprintf(s->collation[TABLE_UTF8MB4], OUTCOME_WIDTH, "%s", LEGACY_COLLATION);
    char table_charset[TABLE_COUNT][2 * OUTCOME_WIDTH + 32];
    snprintf(table_charset[TABLE_DEFAULT_CHARSET], sizeof table_charset[0],
             " DEFAULT CHARSET=%s COLLATE=%s", out.first_row[0], out.first_row[1]);
    snprintf(table_charset[TABLE_UTF8MB4], sizeof table_charset[0],
             " DEFAULT CHARSET=utf8mb4 COLLATE=%s", LEGACY_COLLATION);
    TRY(exec(s, "DROP TABLE IF EXISTS steady_entry, steady_account, steady_account_u8", NULL,
             0, NULL));
    for (int t = 0; t < TABLE_COUNT; t++) {
        snprintf(sql, sizeof sql,
                 "CREATE TABLE %s ("
                 " id INT UNSIGNED NOT NULL PRIMARY KEY,"
                 " branch SMALLINT UNSIGNED NOT NULL,"
                 " holder VARCHAR(48) NOT NULL,"
                 " iban CHAR(34) NOT NULL,"
                 " city VARCHAR(24) NOT NULL,"
                 " balance BIGINT NOT NULL,"
                 " memo VARCHAR(96) NOT NULL,"
                 " opened DATE NOT NULL,"
                 " KEY branch (branch, balance))%s", table_name[t], table_charset[t]);
        TRY(exec(s, sql, NULL, 0, NULL));
    }
    return exec(s, "CREATE TABLE steady_entry ("
                   " id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,"
                   " account_id INT UNSIGNED NOT NULL,"
                   " amount INT NOT NULL,"
                   " kind CHAR(6) NOT NULL,"
                   " booked DATETIME NOT NULL,"
                   " KEY account (account_id, id))", NULL, 0, NULL);
}

/* Multi-row INSERTs in batches; the load is setup, kept small next to the transactions. */
static int load_accounts(struct steady *s, enum table t)
{
    static char sql[LOAD_BATCH * 96 + 128];
    char memo[LOAD_BATCH][32], opened[LOAD_BATCH][16], iban[LOAD_BATCH][40];
    struct param params[LOAD_BATCH * 8];
    for (int first = 1; first <= s->rows; first += LOAD_BATCH) {
        int n = s->rows - first + 1 < LOAD_BATCH ? s->rows - first + 1 : LOAD_BATCH;
        char head[64];
        snprintf(head, sizeof head, "INSERT INTO %s VALUES ", table_name[t]);
        multi_row_insert(sql, sizeof sql, head, "(?, ?, ?, ?, ?, ?, ?, ?)", n);
        for (int i = 0; i < n; i++) {
            snprintf(memo[i], sizeof memo[i], "opened with %u", prng_below(&s->prng, 1000));
            snprintf(opened[i], sizeof opened[i], "20%02u-%02u-%02u",
                     10 + prng_below(&s->prng, 15), 1 + prng_below(&s->prng, 12),
                     1 + prng_below(&s->prng, 28));
            unsigned f = prng_below(&s->prng, COUNT(iban_formats));
            int length = snprintf(iban[i], sizeof iban[i], "%s%02u", iban_formats[f].country,
                                  prng_below(&s->prng, 100));
            for (int d = 0; d < iban_formats[f].digits; d++)
                iban[i][length++] = (char)('0' + prng_below(&s->prng, 10));
            iban[i][length] = '\0';
            struct param *p = &params[8 * i];
            p[0] = P_INT(first + i);
            p[1] = P_INT(prng_below(&s->prng, BRANCHES));
            p[2] = P_TEXT(holders[t][prng_below(&s->prng, COUNT(holders[t]))]);
            p[3] = P_TEXT(iban[i]);
            p[4] = P_TEXT(cities[prng_below(&s->prng, COUNT(cities))]);
            p[5] = P_INT(prng_below(&s->prng, 1000000));
            p[6] = P_TEXT(memo[i]);
            p[7] = P_TEXT(opened[i]);
        }
        TRY(exec(s, sql, params, 8 * n, NULL));
    }
    return EXIT_OK;
}

static int load_entries(struct steady *s)
{
    static char sql[LOAD_BATCH * 40 + 128];
    struct param params[LOAD_BATCH * 3];
    int n = 0;
    for (int a = 1; a <= s->rows; a++) {
        params[3 * n] = P_INT(a);
        params[3 * n + 1] = P_INT((long long)prng_below(&s->prng, 2000) - 1000);
        params[3 * n + 2] = P_TEXT(kinds[prng_below(&s->prng, COUNT(kinds))]);
        if (++n < LOAD_BATCH && a < s->rows)
            continue;
        multi_row_insert(sql, sizeof sql,
                         "INSERT INTO steady_entry (account_id, amount, kind, booked) VALUES ",
                         "(?, ?, ?, NOW())", n);
        TRY(exec(s, sql, params, 3 * n, NULL));
        n = 0;
    }
    s->oldest_entry = 1;
    return EXIT_OK;
}

static int point_read(struct steady *s, enum table t)
{
    struct outcome out;
    TRY(exec(s, s->sql[t][Q_POINT], PARAMS(P_INT(account(s))), &out));
    return expect(out.rows, 1, "primary-key read");
}

static int range_read(struct steady *s, enum table t, enum query q)
{
    int first = account(s);
    return exec(s, s->sql[t][q], PARAMS(P_INT(first), P_INT(first + 10 + (int)prng_below(&s->prng, 50))),
                NULL);
}

static int insert_entry(struct steady *s, int account_id, long long amount)
{
    struct outcome out;
    TRY(exec(s, "INSERT INTO steady_entry (account_id, amount, kind, booked)"
                " VALUES (?, ?, ?, NOW())",
             PARAMS(P_INT(account_id), P_INT(amount), P_TEXT(kinds[amount < 0 ? 0 : 1])), &out));
    return expect(out.affected_rows, 1, "INSERT of an entry");
}

/* A read-only transaction: a few primary-key reads, ranges, an aggregate and sorts. */
static int report(struct steady *s, enum table t)
{
    TRY(exec(s, "START TRANSACTION", NULL, 0, NULL));
    for (int i = 0; i < 4; i++)
        TRY(point_read(s, t));
    TRY(range_read(s, t, Q_RANGE));
    TRY(range_read(s, t, Q_SUM));
    TRY(range_read(s, t, Q_SORTED));
    TRY(range_read(s, t, Q_DISTINCT));
    TRY(exec(s, s->sql[t][Q_BRANCH], PARAMS(P_INT(prng_below(&s->prng, BRANCHES))), NULL));
    return exec(s, "COMMIT", NULL, 0, NULL);
}

/* A read-write transaction: lock one account, move money to another, book it. */
static int transfer(struct steady *s, enum table t)
{
    struct outcome out;
    int from = account(s), to = account(s);
    long long amount = 1 + prng_below(&s->prng, 500);
    char memo[96];
    snprintf(memo, sizeof memo, "transfer %lld from %d", ++s->changes, from);
    TRY(exec(s, "START TRANSACTION", NULL, 0, NULL));
    TRY(exec(s, s->sql[t][Q_LOCK], PARAMS(P_INT(from)), NULL));
    TRY(exec(s, s->sql[t][Q_DEBIT], PARAMS(P_INT(amount), P_INT(from)), &out));
    TRY(expect(out.affected_rows, 1, "debit"));
    TRY(exec(s, s->sql[t][Q_CREDIT], PARAMS(P_INT(amount), P_TEXT(memo), P_INT(to)), &out));
    TRY(expect(out.affected_rows, 1, "credit"));
    TRY(insert_entry(s, from, -amount));
    return exec(s, "COMMIT", NULL, 0, NULL);
}

/* An account's history: an index range in descending order, and a join with GROUP BY. */
static int history(struct steady *s, enum table t)
{
    TRY(exec(s, "SELECT id, amount, kind FROM steady_entry WHERE account_id = ?"
                " ORDER BY id DESC LIMIT 10", PARAMS(P_INT(account(s))), NULL));
    return range_read(s, t, Q_JOIN);
}

/* Retire the oldest entry, book a new one, move an account (an indexed column). */
static int churn(struct steady *s, enum table t)
{
    struct outcome out;
    TRY(exec(s, "START TRANSACTION", NULL, 0, NULL));
    TRY(exec(s, "DELETE FROM steady_entry WHERE id = ?", PARAMS(P_INT(s->oldest_entry)), &out));
    TRY(expect(out.affected_rows, 1, "DELETE of the oldest entry"));
    s->oldest_entry++;
    TRY(insert_entry(s, account(s), (long long)prng_below(&s->prng, 2000) - 1000));
    TRY(exec(s, s->sql[t][Q_MOVE], PARAMS(P_INT(prng_below(&s->prng, BRANCHES)), P_INT(account(s))),
             NULL));
    return exec(s, "COMMIT", NULL, 0, NULL);
}

/* The mix: mostly reads, as in most services; autocommit reads and explicit transactions. */
static int transaction(struct steady *s, long long number)
{
    s->c = &s->connection[number & 1];
    enum table t = prng_below(&s->prng, 3) == 0 ? TABLE_UTF8MB4 : TABLE_DEFAULT_CHARSET;
    unsigned kind = prng_below(&s->prng, 100);
    if (kind < 35)
        return point_read(s, t);
    if (kind < 65)
        return report(s, t);
    if (kind < 85)
        return transfer(s, t);
    if (kind < 93)
        return history(s, t);
    return churn(s, t);
}

int steady_run(const struct target *server, uint64_t seed, int transactions, int rows,
               struct steady_result *result)
{
    static struct steady s;
    memset(&s, 0, sizeof s);
    s.prng = seed ^ 0x5354454144590000u; /* "STEADY": its own stream, apart from the matrix */
    s.rows = rows;
    for (int t = 0; t < TABLE_COUNT; t++)
        for (int q = 0; q < Q_COUNT; q++)
            snprintf(s.sql[t][q], sizeof s.sql[t][q], query_format[q], table_name[t]);

    struct target text = *server, prepared = *server;
    text.database = prepared.database = WORKLOAD_DATABASE;
    prepared.charset = "latin1";
    int rc = client_connect(&s.connection[0], &text, API_TEXT, 1);
    if (rc == EXIT_OK && (rc = client_connect(&s.connection[1], &prepared, API_PREPARED, 1)) != EXIT_OK)
        client_close(&s.connection[0]);
    if (rc != EXIT_OK)
        return rc;

    s.c = &s.connection[0];
    rc = create_tables(&s);
    for (int t = 0; rc == EXIT_OK && t < TABLE_COUNT; t++)
        rc = load_accounts(&s, (enum table)t);
    if (rc == EXIT_OK)
        rc = load_entries(&s);
    printf("steady state: %d transactions on %d accounts per table\n", transactions, rows);
    fflush(stdout);
    for (long long i = 0; rc == EXIT_OK && i < transactions; i++) {
        rc = transaction(&s, i);
        if (rc == EXIT_OK && (i + 1) % (transactions / 4 > 0 ? transactions / 4 : 1) == 0) {
            printf("steady state: %lld of %d transactions\n", i + 1, transactions);
            fflush(stdout);
        }
    }
    s.c = &s.connection[0];
    if (rc == EXIT_OK)
        rc = exec(&s, "DROP TABLE steady_entry, steady_account, steady_account_u8", NULL, 0, NULL);
    result->transactions = transactions;
    for (int t = 0; t < TABLE_COUNT; t++)
        snprintf(result->collation[t], sizeof result->collation[t], "%s", s.collation[t]);
    result->statements = s.connection[0].statements + s.connection[1].statements;
    result->digest = s.connection[0].digest ^ (s.connection[1].digest * 0x100000001b3u);
    client_close(&s.connection[0]);
    client_close(&s.connection[1]);
    return rc;
}
