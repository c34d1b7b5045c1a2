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

/* The steady state of a service: long-lived connections running short transactions. */
#ifndef PROFILE_LOAD_STEADY_H
#define PROFILE_LOAD_STEADY_H

#include <stdint.h>

#include "client.h"

#define DEFAULT_STEADY_TRANSACTIONS 50000
#define DEFAULT_STEADY_ROWS 5000

struct steady_result {
    long long statements;
    long long transactions;
    uint64_t digest;
    char collation[2][OUTCOME_WIDTH]; /* of the two account tables */
};

/* Creates and loads its tables, runs `transactions` transactions, drops the tables. */
int steady_run(const struct target *server, uint64_t seed, int transactions, int rows,
               struct steady_result *result);

#endif
