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

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

static void usage(FILE *out)
{
    fprintf(out,
        "Usage: profile_load --basedir DIR [--workdir DIR] [workload options]\n"
        "       profile_load --socket PATH [--user U] [--password P] [workload options]\n"
        "\n"
        "PGO training workload for MariaDB. With --basedir it installs a private server from\n"
        "DIR, starts it, runs the workload and shuts it down cleanly (so profile counters are\n"
        "written). With --socket it only connects to a running server.\n"
        "\n"
        "  --basedir DIR     installed server: mariadbd in bin/, sbin/ or libexec/\n"
        "  --workdir DIR     where the datadir, socket and logs go (default: a new temp dir,\n"
        "                    removed after a successful run)\n"
        "  --socket PATH     unix socket of a running server (connect-only mode)\n"
        "  --user U          connect-only user (default root)\n"
        "  --password P      connect-only password (default empty)\n"
        "  --engines LIST    innodb,myisam,aria,memory,rocksdb (default all; rocksdb where\n"
        "                    the server has it)\n"
        "  --binlog LIST     off,statement,mixed,row (default all)\n"
        "  --apis LIST       text,prepared,cursor,nonblocking (default all)\n"
        "  --rows N          customers per pass (default %d)\n"
        "  --passes N        runs through the whole matrix (default %d)\n"
        "  --seed N          seed of the statement stream (default %d)\n"
        "  --steady-transactions N  transactions of the steady-state phase, on long-lived\n"
        "                    connections after the matrix; 0: none (default %d)\n"
        "  --steady-rows N   accounts per table of the steady-state phase (default %d)\n"
        "  --setup-counters DIR  where the bootstrap (mariadb-install-db) of an instrumented\n"
        "                    server writes its profile counters, so that they stay out of\n"
        "                    the training's profile (default: WORKDIR/setup-counters)\n"
        "  --report FILE     write the statement counts as JSON\n"
        "  --help, --version\n"
        "\n"
        "Exit codes: 0 ok, 1 workload/SQL failure, 2 usage error, 3 server failure (install,\n"
        "start, connect, server died, unclean shutdown).\n",
        DEFAULT_ROWS, DEFAULT_PASSES, DEFAULT_SEED, DEFAULT_STEADY_TRANSACTIONS,
        DEFAULT_STEADY_ROWS);
}

static int usage_error(const char *format, const char *value)
{
    fprintf(stderr, "profile_load: ");
    fprintf(stderr, format, value);
    fprintf(stderr, "\nTry 'profile_load --help' for more information.\n");
    return EXIT_USAGE;
}

/* "a,b" -> selected[i] set for each named value; unknown or empty names are errors. */
static int parse_list(const char *option, const char *list, const char *const *names, int count,
                      unsigned char *selected)
{
    char *copy = strdup(list);
    int rc = EXIT_OK;
    memset(selected, 0, (size_t)count);
    char *rest = copy;
    for (char *item; rc == EXIT_OK && (item = strsep(&rest, ",")) != NULL;) {
        int found = -1;
        for (int i = 0; i < count; i++)
            if (strcmp(item, names[i]) == 0)
                found = i;
        if (found < 0) {
            fprintf(stderr, "profile_load: unknown value '%s' for %s (expected", item, option);
            for (int i = 0; i < count; i++)
                fprintf(stderr, "%s%s", i ? "," : " ", names[i]);
            fprintf(stderr, ")\nTry 'profile_load --help' for more information.\n");
            rc = EXIT_USAGE;
        } else {
            selected[found] = 1;
        }
    }
    free(copy);
    return rc;
}

static int parse_count(const char *option, const char *text, long long min, long long max,
                       long long *value)
{
    char *end;
    errno = 0;
    long long parsed = strtoll(text, &end, 10);
    if (errno || end == text || *end || parsed < min || parsed > max) {
        fprintf(stderr, "profile_load: %s needs a whole number from %lld to %lld, not '%s'\n"
                        "Try 'profile_load --help' for more information.\n", option, min, max,
                text);
        return EXIT_USAGE;
    }
    *value = parsed;
    return EXIT_OK;
}

int parse_options(int argc, char **argv, struct options *o)
{
    enum { BASEDIR = 256, WORKDIR, SOCKET, USER, PASSWORD, ENGINES, BINLOG, APIS, ROWS, PASSES,
           SEED, REPORT, STEADY_TRANSACTIONS, STEADY_ROWS, SETUP_COUNTERS, HELP, VERSION };
    static const struct option longopts[] = {
        {"basedir", required_argument, NULL, BASEDIR},
        {"workdir", required_argument, NULL, WORKDIR},
        {"socket", required_argument, NULL, SOCKET},
        {"user", required_argument, NULL, USER},
        {"password", required_argument, NULL, PASSWORD},
        {"engines", required_argument, NULL, ENGINES},
        {"binlog", required_argument, NULL, BINLOG},
        {"apis", required_argument, NULL, APIS},
        {"rows", required_argument, NULL, ROWS},
        {"passes", required_argument, NULL, PASSES},
        {"seed", required_argument, NULL, SEED},
        {"report", required_argument, NULL, REPORT},
        {"steady-transactions", required_argument, NULL, STEADY_TRANSACTIONS},
        {"steady-rows", required_argument, NULL, STEADY_ROWS},
        {"setup-counters", required_argument, NULL, SETUP_COUNTERS},
        {"help", no_argument, NULL, HELP},
        {"version", no_argument, NULL, VERSION},
        {NULL, 0, NULL, 0}};

    memset(o, 0, sizeof *o);
    memset(o->engines, 1, sizeof o->engines);
    memset(o->binlogs, 1, sizeof o->binlogs);
    memset(o->apis, 1, sizeof o->apis);
    o->rows = DEFAULT_ROWS;
    o->passes = DEFAULT_PASSES;
    o->seed = DEFAULT_SEED;
    o->steady_transactions = DEFAULT_STEADY_TRANSACTIONS;
    o->steady_rows = DEFAULT_STEADY_ROWS;

    opterr = 0; /* our own message, with the usage hint */
    int c;
    long long value;
    while ((c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
        int rc = EXIT_OK;
        switch (c) {
        case BASEDIR: o->basedir = optarg; break;
        case WORKDIR: o->workdir = optarg; break;
        case SOCKET: o->socket = optarg; break;
        case USER: o->user = optarg; break;
        case PASSWORD: o->password = optarg; break;
        case ENGINES:
            rc = parse_list("--engines", optarg, engine_names, ENGINE_COUNT, o->engines);
            o->engines_given = 1;
            break;
        case BINLOG:
            rc = parse_list("--binlog", optarg, binlog_names, BINLOG_COUNT, o->binlogs);
            break;
        case APIS: rc = parse_list("--apis", optarg, api_names, API_COUNT, o->apis); break;
        case ROWS:
            if ((rc = parse_count("--rows", optarg, 1, 1000000, &value)) == EXIT_OK)
                o->rows = (int)value;
            break;
        case PASSES:
            if ((rc = parse_count("--passes", optarg, 1, 10000, &value)) == EXIT_OK)
                o->passes = (int)value;
            break;
        case SEED: {
            char *end;
            errno = 0;
            o->seed = strtoull(optarg, &end, 10);
            if (errno || end == optarg || *end || optarg[0] == '-')
                rc = usage_error("--seed needs a non-negative whole number, not '%s'", optarg);
            break;
        }
        case REPORT: o->report = optarg; break;
        case STEADY_TRANSACTIONS:
            if ((rc = parse_count("--steady-transactions", optarg, 0, 10000000, &value)) == EXIT_OK)
                o->steady_transactions = (int)value;
            break;
        case STEADY_ROWS:
            if ((rc = parse_count("--steady-rows", optarg, 100, 10000000, &value)) == EXIT_OK)
                o->steady_rows = (int)value;
            break;
        case SETUP_COUNTERS: o->setup_counters = optarg; break;
        case HELP: usage(stdout); return -1;
        case VERSION: printf("profile_load workload version %s\n", PROFILE_LOAD_VERSION); return -1;
        case ':':
            return usage_error("option '%s' needs a value", argv[optind - 1]);
        default:
            return usage_error("unknown option '%s'", argv[optind - 1]);
        }
        if (rc != EXIT_OK)
            return rc;
    }
    if (optind < argc)
        return usage_error("unexpected argument '%s'", argv[optind]);
    if (!o->basedir == !o->socket)
        return usage_error("%s", "give exactly one of --basedir DIR and --socket PATH");
    if (o->basedir && (o->user || o->password))
        return usage_error("%s", "--user and --password go with --socket only");
    if (o->socket && o->workdir)
        return usage_error("%s", "--workdir goes with --basedir only");
    if (o->socket && o->setup_counters)
        return usage_error("%s", "--setup-counters goes with --basedir only");
    if (!o->user)
        o->user = "root";
    if (!o->password)
        o->password = "";
    return EXIT_OK;
}
