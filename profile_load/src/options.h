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
