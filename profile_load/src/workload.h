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

/* The statements of one pass, and the session setup that selects its binlog format. */
#ifndef PROFILE_LOAD_WORKLOAD_H
#define PROFILE_LOAD_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "client.h"
#include "matrix.h"

#define WORKLOAD_DATABASE "profile_load"

struct cell {
    enum engine engine;
    enum binlog binlog;
    enum api api;
    unsigned repetition; /* 0 for the first run through the matrix */
};

struct cell_result {
    long long statements;
    uint64_t digest;
};

/* Creates the database; warns when binlog formats are asked of a server without a binlog. */
int workload_prepare(const struct target *server, int wants_binlog);

int workload_run_cell(const struct target *server, const struct cell *cell, uint64_t seed,
                      int rows, struct cell_result *result);

int workload_cleanup(const struct target *server);

/* Builds "INSERT ... VALUES (?,...),(?,...)" for a batch of n rows (also the steady state's load). */
void multi_row_insert(char *sql, size_t size, const char *head, const char *row, int n);

#endif
