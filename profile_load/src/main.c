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

/* profile_load: the PGO training workload for MariaDB. Runs every selected
   (engine, binlog format, client API) cell, counts what it ran, and fails loudly. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <mysql.h>

#include "engines.h"
#include "matrix.h"
#include "options.h"
#include "server.h"
#include "steady.h"
#include "workload.h"

struct tally {
    const char *skipped; /* why a selected cell does not run; NULL: it runs */
    int ran;
    long long statements;
    uint64_t digest;
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int wants_binlog(const struct options *o)
{
    for (int b = 0; b < BINLOG_COUNT; b++)
        if (o->binlogs[b] && b != BINLOG_OFF)
            return 1;
    return 0;
}

static int selected(const struct options *o, int e, int b, int a)
{
    return o->engines[e] && o->binlogs[b] && o->apis[a];
}

/* Marks the selected cells that do not run, for the report: those of an engine the server
   lacks (engines_in_* named it already), and those their engine refuses, named here. Not as
   "pass ...": the progress counts the passes that run. */
static void skip_cells(const struct options *o, const char *const missing[ENGINE_COUNT],
                       struct tally tallies[ENGINE_COUNT][BINLOG_COUNT][API_COUNT])
{
    for (int e = 0; e < ENGINE_COUNT; e++)
        for (int b = 0; b < BINLOG_COUNT; b++)
            for (int a = 0; a < API_COUNT; a++) {
                const char *refused = cell_refused((enum engine)e, (enum binlog)b);
                if (!selected(o, e, b, a) || !(missing[e] || refused))
                    continue;
                tallies[e][b][a].skipped = missing[e] ? missing[e] : refused;
                if (!missing[e])
                    printf("skipping engine=%s binlog=%s api=%s: %s\n", engine_names[e],
                           binlog_names[b], api_names[a], refused);
            }
}

static int cell_count(const struct options *o,
                      struct tally tallies[ENGINE_COUNT][BINLOG_COUNT][API_COUNT])
{
    int n = 0;
    for (int e = 0; e < ENGINE_COUNT; e++)
        for (int b = 0; b < BINLOG_COUNT; b++)
            for (int a = 0; a < API_COUNT; a++)
                n += selected(o, e, b, a) && !tallies[e][b][a].skipped;
    return n;
}

/* Repetitions of a cell fold into one tally, so the report has one row per cell. */
static void add_to_tally(struct tally *t, const struct cell_result *r)
{
    t->ran = 1;
    t->statements += r->statements;
    t->digest = (t->digest ^ r->digest) * 0x100000001b3u;
}

static int run_matrix(const struct options *o, const struct target *server,
                      struct tally tallies[ENGINE_COUNT][BINLOG_COUNT][API_COUNT])
{
    int total = o->passes * cell_count(o, tallies);
    int number = 0;
    for (int rep = 0; rep < o->passes; rep++)
        for (int e = 0; e < ENGINE_COUNT; e++)
            for (int b = 0; b < BINLOG_COUNT; b++)
                for (int a = 0; a < API_COUNT; a++) {
                    if (!selected(o, e, b, a) || tallies[e][b][a].skipped)
                        continue;
                    struct cell cell = {(enum engine)e, (enum binlog)b, (enum api)a,
                                        (unsigned)rep};
                    struct cell_result result;
                    printf("pass %d of %d: engine=%s binlog=%s api=%s\n", ++number, total,
                           engine_names[e], binlog_names[b], api_names[a]);
                    fflush(stdout);
                    int rc = workload_run_cell(server, &cell, o->seed, o->rows, &result);
                    add_to_tally(&tallies[e][b][a], &result);
                    if (rc != EXIT_OK) {
                        fprintf(stderr, "profile_load: pass %d of %d failed: engine=%s"
                                        " binlog=%s api=%s\n", number, total, engine_names[e],
                                binlog_names[b], api_names[a]);
                        return rc;
                    }
                }
    return EXIT_OK;
}

static long long print_table(struct tally tallies[ENGINE_COUNT][BINLOG_COUNT][API_COUNT],
                             const struct steady_result *steady)
{
    long long total = 0;
    printf("\n%-8s %-10s %-12s %12s\n", "engine", "binlog", "api", "statements");
    for (int e = 0; e < ENGINE_COUNT; e++)
        for (int b = 0; b < BINLOG_COUNT; b++)
            for (int a = 0; a < API_COUNT; a++) {
                const struct tally *t = &tallies[e][b][a];
                if (!t->ran)
                    continue;
                printf("%-8s %-10s %-12s %12lld\n", engine_names[e], binlog_names[b],
                       api_names[a], t->statements);
                total += t->statements;
            }
    if (steady->transactions) {
        printf("%-32s %12lld\n", "steady state", steady->statements);
        total += steady->statements;
    }
    printf("%-32s %12lld\n", "total", total);
    return total;
}

/* A reason can quote the server (information_schema.ENGINES): escaped as JSON wants. */
static void json_string(FILE *f, const char *text)
{
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(f, "\\%c", *c);
        else if (*c < 0x20)
            fprintf(f, "\\u%04x", *c);
        else
            fputc(*c, f);
    }
    fputc('"', f);
}

static void write_skipped(FILE *f, struct tally tallies[ENGINE_COUNT][BINLOG_COUNT][API_COUNT])
{
    const char *separator = "\n";
    fprintf(f, "  \"skipped\": [");
    for (int e = 0; e < ENGINE_COUNT; e++)
        for (int b = 0; b < BINLOG_COUNT; b++)
            for (int a = 0; a < API_COUNT; a++) {
                const struct tally *t = &tallies[e][b][a];
                if (!t->skipped)
                    continue;
                fprintf(f, "%s    {\"engine\": \"%s\", \"binlog\": \"%s\", \"api\": \"%s\","
                           " \"reason\": ", separator, engine_names[e], binlog_names[b],
                        api_names[a]);
                json_string(f, t->skipped);
                fprintf(f, "}");
                separator = ",\n";
            }
    fprintf(f, "%s],\n", separator[0] == ',' ? "\n  " : "");
}

static int write_report(const char *path, const struct options *o,
                        struct tally tallies[ENGINE_COUNT][BINLOG_COUNT][API_COUNT],
                        const struct steady_result *steady, long long total, double seconds)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return EXIT_WORKLOAD;
    }
    fprintf(f, "{\n  \"workload_version\": \"%s\",\n  \"seed\": %llu,\n  \"rows\": %d,\n"
               "  \"passes\": %d,\n  \"cells\": [", PROFILE_LOAD_VERSION,
            (unsigned long long)o->seed, o->rows, o->passes);
    const char *separator = "\n";
    for (int e = 0; e < ENGINE_COUNT; e++)
        for (int b = 0; b < BINLOG_COUNT; b++)
            for (int a = 0; a < API_COUNT; a++) {
                const struct tally *t = &tallies[e][b][a];
                if (!t->ran)
                    continue;
                fprintf(f, "%s    {\"engine\": \"%s\", \"binlog\": \"%s\", \"api\": \"%s\","
                           " \"statements\": %lld, \"digest\": \"%016llx\"}", separator,
                        engine_names[e], binlog_names[b], api_names[a], t->statements,
                        (unsigned long long)t->digest);
                separator = ",\n";
            }
    fprintf(f, "\n  ],\n");
    write_skipped(f, tallies);
    fprintf(f, "  \"steady\": {\"transactions\": %lld, \"rows\": %d, \"statements\": %lld,"
               " \"digest\": \"%016llx\", \"collations\": [\"%s\", \"%s\"]},\n",
            steady->transactions, o->steady_rows, steady->statements,
            (unsigned long long)steady->digest, steady->collation[0], steady->collation[1]);
    fprintf(f, "  \"total_statements\": %lld,\n  \"seconds\": %.1f\n}\n", total, seconds);
    if (fclose(f) != 0) {
        perror(path);
        return EXIT_WORKLOAD;
    }
    return EXIT_OK;
}

int main(int argc, char **argv)
{
    double started = now();
    struct options o;
    int rc = parse_options(argc, argv, &o);
    if (rc != EXIT_OK)
        return rc < 0 ? EXIT_OK : rc;

    if (mysql_library_init(0, NULL, NULL)) {
        fprintf(stderr, "profile_load: cannot initialise the client library\n");
        return EXIT_WORKLOAD;
    }
    static struct server server;
    struct target target = {o.socket, o.user, o.password, NULL, NULL};
    static const char *missing[ENGINE_COUNT]; /* why a selected engine is not trained */
    if (o.basedir) {
        rc = server_init(&server, o.basedir);
        if (rc == EXIT_OK)
            rc = engines_in_basedir(&server, o.engines, o.engines_given, missing);
        if (rc == EXIT_OK)
            rc = server_make_workdir(&server, o.workdir, o.setup_counters);
        if (rc == EXIT_OK)
            rc = server_install(&server);
        if (rc == EXIT_OK)
            rc = server_start(&server);
        if (rc != EXIT_OK) {
            if (server.workdir[0])
                fprintf(stderr, "profile_load: work directory kept: %s\n", server.workdir);
            mysql_library_end();
            return rc;
        }
        target.socket = server.socket;
    } else if ((rc = engines_in_server(&target, o.engines, o.engines_given, missing)) != EXIT_OK) {
        mysql_library_end();
        return rc;
    }

    static struct tally tallies[ENGINE_COUNT][BINLOG_COUNT][API_COUNT];
    static struct steady_result steady;
    skip_cells(&o, missing, tallies);
    rc = workload_prepare(&target, wants_binlog(&o));
    if (rc == EXIT_OK)
        rc = run_matrix(&o, &target, tallies);
    if (rc == EXIT_OK && o.steady_transactions > 0)
        rc = steady_run(&target, o.seed, o.steady_transactions, o.steady_rows, &steady);
    if (rc == EXIT_OK)
        rc = workload_cleanup(&target);

    if (o.basedir) {
        if (rc == EXIT_SERVER)
            server_explain_death(&server);
        else if (server_stop(&server) != EXIT_OK) /* prints the log tail itself */
            rc = rc == EXIT_OK ? EXIT_SERVER : rc;
        else if (rc != EXIT_OK)
            server_print_log_tail(&server);
    }
    long long total = print_table(tallies, &steady);
    double seconds = now() - started;
    printf("%s after %.1f s\n", rc == EXIT_OK ? "done" : "FAILED", seconds);
    if (rc == EXIT_OK && o.report)
        rc = write_report(o.report, &o, tallies, &steady, total, seconds);
    if (o.basedir) {
        if (rc == EXIT_OK)
            server_remove_workdir(&server);
        else
            fprintf(stderr, "profile_load: work directory kept: %s\n", server.workdir);
    }
    mysql_library_end();
    return rc;
}
