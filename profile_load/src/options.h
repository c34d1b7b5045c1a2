/* Command line: what to run, against which server. */
#ifndef PROFILE_LOAD_OPTIONS_H
#define PROFILE_LOAD_OPTIONS_H

#include <stdint.h>

#include "matrix.h"
#include "steady.h"

#define DEFAULT_ROWS 200
#define DEFAULT_PASSES 1
#define DEFAULT_SEED 1

struct options {
    const char *basedir; /* lifecycle mode: install, start and stop a private server */
    const char *workdir;
    const char *socket;  /* connect-only mode */
    const char *user;
    const char *password;
    unsigned char engines[ENGINE_COUNT];
    int engines_given; /* --engines named them: an engine the server lacks is an error */
    unsigned char binlogs[BINLOG_COUNT];
    unsigned char apis[API_COUNT];
    int rows;
    int passes;
    uint64_t seed;
    const char *report;
    int steady_transactions;
    int steady_rows;
    const char *setup_counters; /* lifecycle mode: GCOV_PREFIX of the bootstrap */
};

/* Returns EXIT_OK to go on, EXIT_USAGE after a message, or -1 when --help or --version
   has been answered. */
int parse_options(int argc, char **argv, struct options *options);

#endif
