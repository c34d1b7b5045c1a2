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
