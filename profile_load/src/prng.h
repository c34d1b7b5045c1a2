/* splitmix64: our own generator, so a seed means the same statements on every libc. */
#ifndef PROFILE_LOAD_PRNG_H
#define PROFILE_LOAD_PRNG_H

#include <stdint.h>

static inline uint64_t prng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* Uniform enough for a workload; the modulo bias is irrelevant at these ranges. */
static inline unsigned prng_below(uint64_t *state, unsigned bound)
{
    return (unsigned)(prng_next(state) % bound);
}

#endif
