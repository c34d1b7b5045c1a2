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

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prng.h"
#include "workload.h"

/* Multi-byte names exercise utf8mb4 conversion and collation; O'Brien needs escaping. */
static const char *const first_names[] = {
    "Aino", "Björn", "Çağla", "Dmitrij", "Élodie", "Fumiko", "Grzegorz", "Hương",
    "Ingrid", "José", "Kristian", "Łucja", "Monty", "Nuño", "Ørjan", "Zoë"};
static const char *const last_names[] = {
    "Nielsen", "Widenius", "Müller", "Østergård", "Kowalczyk", "Иванов",
    "Παπαδόπουλος", "山田", "Sørensen", "García", "Núñez", "O'Brien"};
static const char *const cities[] = {
    "Helsinki", "Zürich", "København", "Kraków", "São Paulo", "Москва",
    "Αθήνα", "東京", "서울", "Reykjavík", "İstanbul", "القاهرة"};
static const char *const words[] = {
    "premium", "🐬 dolphin", "früh", "naïve", "ℵ₀", "żółw", "café", "日本語", "🚀", "ok"};

#define COUNT(array) ((unsigned)(sizeof(array) / sizeof((array)[0])))
#define INSERT_BATCH 10
#define ORDER_BATCH 20

struct pass {
    struct client client;
    const struct cell *cell;
    uint64_t prng;
    int rows;
    int *orders;           /* orders per customer id; index 0 unused */
    unsigned char *deleted; /* per customer id */
    long long changes;     /* makes every UPDATE write a value the row does not have */
};


static int run(struct pass *p, struct outcome *out, const char *sql, const struct param *params,
               int nparams)
{
    return client_exec(&p->client, sql, params, nparams, out);
}

static int check_failed(const struct pass *p, const char *format, ...)
{
    va_list args;
    fprintf(stderr, "profile_load: check failed (engine=%s binlog=%s api=%s): ",
            engine_names[p->cell->engine], binlog_names[p->cell->binlog],
            api_names[p->cell->api]);
    va_start(args, format);
    vfprintf(stderr, format, args);
    va_end(args);
    fprintf(stderr, "\n");
    return EXIT_WORKLOAD;
}

static int expect_affected(struct pass *p, const struct outcome *out, long long want,
                           const char *what)
{
    if (out->affected_rows == want)
        return EXIT_OK;
    return check_failed(p, "%s affected %lld rows, expected %lld", what, out->affected_rows,
                        want);
}

static int expect_value(struct pass *p, const struct outcome *out, int column, const char *want,
                        const char *what)
{
    if (out->rows >= 1 && strcmp(out->first_row[column], want) == 0)
        return EXIT_OK;
    return check_failed(p, "%s is '%s', expected '%s'", what,
                        out->rows ? out->first_row[column] : "(no row)", want);
}

static int expect_number(struct pass *p, const struct outcome *out, int column, long long want,
                         const char *what)
{
    char text[32];
    snprintf(text, sizeof text, "%lld", want);
    return expect_value(p, out, column, text, what);
}

static const char *pick(struct pass *p, const char *const *list, unsigned n)
{
    return list[prng_below(&p->prng, n)];
}

static int random_customer(struct pass *p)
{
    return 1 + (int)prng_below(&p->prng, (unsigned)p->rows);
}

/* MyRocks holds a row lock on every row an updating statement reads, until the commit, and
   refuses the lock past rocksdb_max_row_locks (default 1048576). The largest statement of a
   pass, DELETE FROM orders WHERE amount < ?, scans every order (at most three per customer
   plus one per transaction): at --rows 1000000 that is over the default. A MyRocks user runs
   such a statement with the session's limit raised, not with rocksdb_commit_in_the_middle,
   which would commit half a statement; never lowered, so a server's larger limit stays. */
static int rocksdb_session(struct pass *p)
{
    return run(p, NULL, "SET SESSION rocksdb_max_row_locks ="
                        " GREATEST(@@SESSION.rocksdb_max_row_locks, ?)",
               PARAMS(P_INT(4LL * p->rows + 100)));
}

static int session_setup(struct pass *p)
{
    struct outcome out;
    enum binlog binlog = p->cell->binlog;
    if (p->cell->engine == ENGINE_ROCKSDB)
        TRY(rocksdb_session(p));
    if (binlog == BINLOG_OFF) {
        TRY(run(p, NULL, "SET SESSION sql_log_bin = 0", NULL, 0));
        TRY(run(p, &out, "SELECT @@SESSION.sql_log_bin", NULL, 0));
        return expect_value(p, &out, 0, "0", "@@sql_log_bin");
    }
    TRY(run(p, NULL, "SET SESSION sql_log_bin = 1", NULL, 0));
    char sql[96];
    snprintf(sql, sizeof sql, "SET SESSION binlog_format = '%s'", binlog_sql[binlog]);
    TRY(run(p, NULL, sql, NULL, 0));
    TRY(run(p, &out, "SELECT @@SESSION.binlog_format, @@SESSION.sql_log_bin", NULL, 0));
    TRY(expect_value(p, &out, 0, binlog_sql[binlog], "@@binlog_format"));
    return expect_value(p, &out, 1, "1", "@@sql_log_bin");
}

/* Fresh tables every pass: AUTO_INCREMENT restarts at 1, so the ids the pass
   computes are the ids in the table. */
static int create_tables(struct pass *p)
{
    const char *engine = engine_sql[p->cell->engine];
    char sql[1024];
    TRY(run(p, NULL, "DROP TABLE IF EXISTS scratch, orders, customer", NULL, 0));
    /* USING BTREE: MEMORY defaults to hash indexes, which cannot serve range scans (MyRocks
       ignores it). MyRocks warns (1815, rocksdb_strict_collation_check) that the indexed
       utf8mb4_unicode_ci city allows no index-only reads: its secondary index reads go to
       the primary key for the value. A MyRocks user's existing tables keep their collation,
       and a _bin one would change what the ORDER BYs and LIKEs return: kept. */
    snprintf(sql, sizeof sql,
             "CREATE TABLE customer ("
             " id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,"
             " name VARCHAR(64) NOT NULL,"
             " city VARCHAR(32) NOT NULL,"
             " score INT NOT NULL,"
             " balance DECIMAL(12,2) NOT NULL,"
             " note VARCHAR(160) NOT NULL,"
             " created DATETIME NOT NULL,"
             " KEY city (city),"
             " KEY score (score) USING BTREE"
             ") ENGINE=%s DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci", engine);
    TRY(run(p, NULL, sql, NULL, 0));
    snprintf(sql, sizeof sql,
             "CREATE TABLE orders ("
             " id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,"
             " customer_id INT UNSIGNED NOT NULL,"
             " amount DECIMAL(10,2) NOT NULL,"
             " status VARCHAR(16) NOT NULL,"
             " KEY customer (customer_id)"
             ") ENGINE=%s DEFAULT CHARSET=utf8mb4", engine);
    return run(p, NULL, sql, NULL, 0);
}

struct customer_row {
    char name[96];
    const char *city;
    long long score;
    char balance[24];
    char note[160];
    char created[24];
};

static void make_customer(struct pass *p, struct customer_row *row)
{
    snprintf(row->name, sizeof row->name, "%s %s", pick(p, first_names, COUNT(first_names)),
             pick(p, last_names, COUNT(last_names)));
    row->city = pick(p, cities, COUNT(cities));
    row->score = prng_below(&p->prng, 1000);
    snprintf(row->balance, sizeof row->balance, "%u.%02u", prng_below(&p->prng, 100000),
             prng_below(&p->prng, 100));
    snprintf(row->note, sizeof row->note, "%s %s %s", pick(p, words, COUNT(words)),
             pick(p, words, COUNT(words)), pick(p, words, COUNT(words)));
    snprintf(row->created, sizeof row->created, "20%02u-%02u-%02u %02u:%02u:%02u",
             10 + prng_below(&p->prng, 15), 1 + prng_below(&p->prng, 12),
             1 + prng_below(&p->prng, 28), prng_below(&p->prng, 24), prng_below(&p->prng, 60),
             prng_below(&p->prng, 60));
}

static void customer_params(const struct customer_row *row, struct param *params)
{
    params[0] = P_TEXT(row->name);
    params[1] = P_TEXT(row->city);
    params[2] = P_INT(row->score);
    params[3] = P_TEXT(row->balance);
    params[4] = P_TEXT(row->note);
    params[5] = P_TEXT(row->created);
}

void multi_row_insert(char *sql, size_t size, const char *head, const char *row, int n)
{
    size_t used = (size_t)snprintf(sql, size, "%s", head);
    for (int i = 0; i < n && used < size; i++)
        used += (size_t)snprintf(sql + used, size - used, "%s%s", i ? "," : "", row);
}

static int insert_customers(struct pass *p)
{
    static const char head[] =
        "INSERT INTO customer (name, city, score, balance, note, created) VALUES ";
    struct customer_row rows[INSERT_BATCH];
    struct param params[6 * INSERT_BATCH];
    struct outcome out;
    char sql[1024];
    int inserted = 0;

    /* Half one row per statement, half in multi-row statements. unique_checks stays on: MyRocks
       reads every new key for a duplicate then, and skips that only for a bulk load. */
    for (; inserted < p->rows / 2; inserted++) {
        make_customer(p, &rows[0]);
        customer_params(&rows[0], params);
        snprintf(sql, sizeof sql, "%s(?, ?, ?, ?, ?, ?)", head);
        TRY(run(p, &out, sql, params, 6));
        TRY(expect_affected(p, &out, 1, "single-row INSERT"));
    }
    while (inserted < p->rows) {
        int n = p->rows - inserted < INSERT_BATCH ? p->rows - inserted : INSERT_BATCH;
        for (int i = 0; i < n; i++) {
            make_customer(p, &rows[i]);
            customer_params(&rows[i], &params[6 * i]);
        }
        multi_row_insert(sql, sizeof sql, head, "(?, ?, ?, ?, ?, ?)", n);
        TRY(run(p, &out, sql, params, 6 * n));
        TRY(expect_affected(p, &out, n, "multi-row INSERT"));
        inserted += n;
    }

    TRY(run(p, &out, "SELECT COUNT(*), MIN(id), MAX(id) FROM customer", NULL, 0));
    TRY(expect_number(p, &out, 0, p->rows, "customer count"));
    TRY(expect_number(p, &out, 1, 1, "first customer id (AUTO_INCREMENT not reset?)"));
    return expect_number(p, &out, 2, p->rows, "last customer id");
}

static int insert_orders(struct pass *p)
{
    struct param params[3 * ORDER_BATCH];
    char amounts[ORDER_BATCH][16];
    struct outcome out;
    char sql[1024];
    int n = 0;
    long long total = 0;

    for (int customer = 1; customer <= p->rows; customer++) {
        p->orders[customer] = 1 + (int)prng_below(&p->prng, 3);
        for (int k = 0; k < p->orders[customer]; k++) {
            snprintf(amounts[n], sizeof amounts[n], "%u.%02u", 1 + prng_below(&p->prng, 500),
                     prng_below(&p->prng, 100));
            params[3 * n] = P_INT(customer);
            params[3 * n + 1] = P_TEXT(amounts[n]);
            params[3 * n + 2] = P_TEXT("new");
            total++;
            int last = customer == p->rows && k == p->orders[customer] - 1;
            if (++n < ORDER_BATCH && !last)
                continue;
            multi_row_insert(sql, sizeof sql,
                             "INSERT INTO orders (customer_id, amount, status) VALUES ",
                             "(?, ?, ?)", n);
            TRY(run(p, &out, sql, params, 3 * n));
            TRY(expect_affected(p, &out, n, "orders INSERT"));
            n = 0;
        }
    }
    TRY(run(p, &out, "SELECT COUNT(*) FROM orders", NULL, 0));
    return expect_number(p, &out, 0, total, "order count");
}

static int read_rows(struct pass *p)
{
    struct outcome out;
    for (int i = 0; i < p->rows / 2; i++) {
        TRY(run(p, &out, "SELECT id, name, city, score, balance, note, created"
                         " FROM customer WHERE id = ?", PARAMS(P_INT(random_customer(p)))));
        if (out.rows != 1)
            return check_failed(p, "primary key SELECT found %lld rows", out.rows);
    }
    for (int i = 0; i < p->rows / 4; i++)
        TRY(run(p, NULL, "SELECT id, name, score FROM customer WHERE city = ?"
                         " ORDER BY name LIMIT 10",
                PARAMS(P_TEXT(pick(p, cities, COUNT(cities))))));
    for (int i = 0; i < p->rows / 10; i++) {
        long long low = prng_below(&p->prng, 1000);
        TRY(run(p, NULL, "SELECT id, score FROM customer WHERE score BETWEEN ? AND ?"
                         " ORDER BY score, id LIMIT 20",
                PARAMS(P_INT(low), P_INT(low + 50))));
    }
    for (int i = 0; i < 1 + p->rows / 20; i++)
        TRY(run(p, NULL, "SELECT c.name, COUNT(o.id), SUM(o.amount)"
                         " FROM customer c JOIN orders o ON o.customer_id = c.id"
                         " WHERE c.city = ? GROUP BY c.id, c.name"
                         " ORDER BY SUM(o.amount) DESC, c.id LIMIT 5",
                PARAMS(P_TEXT(pick(p, cities, COUNT(cities))))));
    for (int i = 0; i < 1 + p->rows / 50; i++) {
        TRY(run(p, &out, "SELECT city, COUNT(*), AVG(score), MIN(balance), MAX(balance),"
                         " SUM(balance) FROM customer GROUP BY city"
                         " ORDER BY COUNT(*) DESC, city LIMIT ?",
                PARAMS(P_INT(1 + prng_below(&p->prng, COUNT(cities))))));
        if (out.rows < 1)
            return check_failed(p, "GROUP BY city returned no rows");
        TRY(run(p, NULL, "SELECT COUNT(DISTINCT city), STDDEV(score), MAX(created)"
                         " FROM customer WHERE created >= ?", PARAMS(P_TEXT("2015-01-01"))));
        TRY(run(p, NULL, "SELECT COUNT(*) FROM customer WHERE id IN"
                         " (SELECT customer_id FROM orders WHERE amount > ?)",
                PARAMS(P_INT(prng_below(&p->prng, 500)))));
        TRY(run(p, NULL, "SELECT name FROM customer WHERE name LIKE ? ORDER BY id LIMIT 10",
                PARAMS(P_TEXT(i % 2 ? "K%" : "%ø%"))));
    }
    return EXIT_OK;
}

static int update_rows(struct pass *p)
{
    struct outcome out;
    char note[160];
    for (int i = 0; i < p->rows / 5; i++) {
        TRY(run(p, &out, "UPDATE customer SET score = score + ? WHERE id = ?",
                PARAMS(P_INT(1 + prng_below(&p->prng, 9)), P_INT(random_customer(p)))));
        TRY(expect_affected(p, &out, 1, "UPDATE of an indexed column"));
    }
    for (int i = 0; i < p->rows / 5; i++) {
        snprintf(note, sizeof note, "change %lld %s", ++p->changes, pick(p, words, COUNT(words)));
        TRY(run(p, &out, "UPDATE customer SET note = ?, balance = balance + ? WHERE id = ?",
                PARAMS(P_TEXT(note), P_TEXT("0.25"), P_INT(random_customer(p)))));
        TRY(expect_affected(p, &out, 1, "UPDATE of unindexed columns"));
    }
    for (int i = 0; i < 1 + p->rows / 50; i++) {
        int first = random_customer(p);
        TRY(run(p, &out, "UPDATE orders SET amount = amount + 1"
                         " WHERE customer_id BETWEEN ? AND ?",
                PARAMS(P_INT(first), P_INT(first + 5))));
        if (out.affected_rows < 1)
            return check_failed(p, "range UPDATE changed no rows");
    }
    /* LIMIT without ORDER BY is unsafe for statement logging: MIXED switches to rows. */
    TRY(run(p, &out, "UPDATE orders SET status = ? WHERE status = 'new' LIMIT 2",
            PARAMS(P_TEXT("shipped"))));
    if (out.affected_rows < 1)
        return check_failed(p, "UPDATE ... LIMIT changed no rows");
    return EXIT_OK;
}

static int transactions(struct pass *p)
{
    struct outcome out;
    int transactional = p->cell->engine == ENGINE_INNODB || p->cell->engine == ENGINE_ROCKSDB;
    for (int i = 0; i < 1 + p->rows / 25; i++) {
        int customer = random_customer(p);
        TRY(run(p, NULL, "START TRANSACTION", NULL, 0));
        TRY(run(p, &out, "INSERT INTO orders (customer_id, amount, status) VALUES (?, ?, ?)",
                PARAMS(P_INT(customer), P_TEXT("19.99"), P_TEXT("new"))));
        TRY(expect_affected(p, &out, 1, "INSERT in a transaction"));
        TRY(run(p, &out, "UPDATE customer SET balance = balance - ? WHERE id = ?",
                PARAMS(P_TEXT("19.99"), P_INT(customer))));
        TRY(expect_affected(p, &out, 1, "UPDATE in a transaction"));
        TRY(run(p, NULL, "COMMIT", NULL, 0));
        p->orders[customer]++;
    }
    for (int i = 0; i < 1 + p->rows / 50; i++) {
        int customer = random_customer(p);
        TRY(run(p, NULL, "START TRANSACTION", NULL, 0));
        TRY(run(p, &out, "DELETE FROM orders WHERE customer_id = ?", PARAMS(P_INT(customer))));
        TRY(expect_affected(p, &out, p->orders[customer], "DELETE in a transaction"));
        TRY(run(p, NULL, "UPDATE customer SET score = score + 1 WHERE id = ?",
                PARAMS(P_INT(customer))));
        TRY(run(p, NULL, "ROLLBACK", NULL, 0));
        /* InnoDB and MyRocks undo the delete; the other engines keep it (with a warning). */
        if (!transactional)
            p->orders[customer] = 0;
        TRY(run(p, &out, "SELECT COUNT(*) FROM orders WHERE customer_id = ?",
                PARAMS(P_INT(customer))));
        TRY(expect_number(p, &out, 0, p->orders[customer], "orders after ROLLBACK"));
    }
    return EXIT_OK;
}

static int delete_rows(struct pass *p)
{
    struct outcome out;
    int deletes = p->rows / 20;
    for (int i = 0; i < deletes; i++) {
        int customer = random_customer(p);
        while (p->deleted[customer])
            customer = customer % p->rows + 1;
        TRY(run(p, &out, "DELETE FROM orders WHERE customer_id = ?", PARAMS(P_INT(customer))));
        TRY(expect_affected(p, &out, p->orders[customer], "DELETE of a customer's orders"));
        TRY(run(p, &out, "DELETE FROM customer WHERE id = ?", PARAMS(P_INT(customer))));
        TRY(expect_affected(p, &out, 1, "DELETE by primary key"));
        p->deleted[customer] = 1;
    }
    TRY(run(p, NULL, "DELETE FROM orders WHERE amount < ?", PARAMS(P_TEXT("10.00"))));
    TRY(run(p, &out, "SELECT COUNT(*) FROM customer", NULL, 0));
    return expect_number(p, &out, 0, p->rows - deletes, "customers after DELETE");
}

static int schema_changes(struct pass *p)
{
    struct outcome out;
    char sql[512];
    int remaining = p->rows - p->rows / 20;
    /* MyRocks adds a key in place but a column only by copying the table: a MyRocks user's
       ALTER copies too, and the copy's rows stay within the pass's row lock limit. */
    TRY(run(p, NULL, "ALTER TABLE customer ADD COLUMN tier TINYINT UNSIGNED NOT NULL DEFAULT 0,"
                     " ADD KEY tier (tier)", NULL, 0));
    TRY(run(p, &out, "UPDATE customer SET tier = 1 + score % 5", NULL, 0));
    TRY(expect_affected(p, &out, remaining, "UPDATE of the new column"));
    TRY(run(p, NULL, "SELECT tier, COUNT(*) FROM customer GROUP BY tier ORDER BY tier", NULL, 0));
    TRY(run(p, NULL, "ALTER TABLE customer DROP KEY tier, DROP COLUMN tier", NULL, 0));

    snprintf(sql, sizeof sql,
             "CREATE TABLE scratch (id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,"
             " city VARCHAR(32) NOT NULL, total DECIMAL(14,2) NOT NULL)"
             " ENGINE=%s DEFAULT CHARSET=utf8mb4", engine_sql[p->cell->engine]);
    TRY(run(p, NULL, sql, NULL, 0));
    TRY(run(p, &out, "INSERT INTO scratch (city, total)"
                     " SELECT city, SUM(balance) FROM customer GROUP BY city", NULL, 0));
    if (out.affected_rows < 1)
        return check_failed(p, "INSERT ... SELECT inserted no rows");
    /* MyRocks too: TRUNCATE makes the table anew (its counter restarts), and the reset of an
       empty table's counter is in place: the same id comes back. */
    TRY(run(p, NULL, "TRUNCATE TABLE scratch", NULL, 0));
    TRY(run(p, NULL, "ALTER TABLE scratch AUTO_INCREMENT = 1", NULL, 0));
    TRY(run(p, NULL, "INSERT INTO scratch (city, total) VALUES (?, 0)",
            PARAMS(P_TEXT(pick(p, cities, COUNT(cities))))));
    TRY(run(p, &out, "SELECT MAX(id), COUNT(*) FROM scratch", NULL, 0));
    TRY(expect_number(p, &out, 0, 1, "id after TRUNCATE and AUTO_INCREMENT reset"));
    return run(p, NULL, "DROP TABLE scratch", NULL, 0);
}

static int run_pass(struct pass *p)
{
    TRY(session_setup(p));
    TRY(create_tables(p));
    TRY(insert_customers(p));
    TRY(insert_orders(p));
    TRY(read_rows(p));
    TRY(update_rows(p));
    TRY(transactions(p));
    TRY(delete_rows(p));
    return schema_changes(p);
}

/* The API is left out of the stream's seed: all four APIs of an (engine, binlog) cell
   send the same statements, so their profiles differ only in the client path. */
static uint64_t cell_seed(uint64_t seed, const struct cell *cell)
{
    uint64_t state = seed;
    uint64_t mixed = prng_next(&state);
    state = mixed ^ ((uint64_t)cell->repetition << 32) ^ ((uint64_t)cell->engine << 8) ^
            (uint64_t)cell->binlog;
    prng_next(&state);
    return state;
}

int workload_run_cell(const struct target *server, const struct cell *cell, uint64_t seed,
                      int rows, struct cell_result *result)
{
    struct pass p = {.cell = cell, .prng = cell_seed(seed, cell), .rows = rows};
    struct target database = *server;
    database.database = WORKLOAD_DATABASE;
    p.orders = calloc((size_t)rows + 1, sizeof *p.orders);
    p.deleted = calloc((size_t)rows + 1, 1);
    if (!p.orders || !p.deleted) {
        perror("profile_load");
        exit(EXIT_WORKLOAD);
    }
    int rc = client_connect(&p.client, &database, cell->api, 1);
    if (rc == EXIT_OK)
        rc = run_pass(&p);
    result->statements = p.client.statements;
    result->digest = p.client.digest;
    client_close(&p.client);
    free(p.orders);
    free(p.deleted);
    return rc;
}

int workload_prepare(const struct target *server, int wants_binlog)
{
    struct client c;
    struct outcome out;
    TRY(client_connect(&c, server, API_TEXT, 0));
    int rc = client_exec(&c, "CREATE DATABASE IF NOT EXISTS " WORKLOAD_DATABASE
                             " CHARACTER SET utf8mb4", NULL, 0, NULL);
    if (rc == EXIT_OK)
        rc = client_exec(&c, "SELECT @@GLOBAL.log_bin", NULL, 0, &out);
    if (rc == EXIT_OK && wants_binlog && strcmp(out.first_row[0], "1") != 0)
        fprintf(stderr, "profile_load: warning: the server runs without --log-bin, so the"
                        " binlog formats are set but nothing is logged\n");
    client_close(&c);
    return rc;
}

int workload_cleanup(const struct target *server)
{
    struct client c;
    TRY(client_connect(&c, server, API_TEXT, 1));
    int rc = client_exec(&c, "DROP DATABASE " WORKLOAD_DATABASE, NULL, 0, NULL);
    client_close(&c);
    return rc;
}
