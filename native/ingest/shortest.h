/* Python's repr of a double (float.__repr__), without Python: the shortest
 * decimal that reads back as the same double (Ryu's algorithm, Ulf Adams,
 * PLDI 2018), laid out as repr lays it out. One owner: shortest.c. Its
 * tables of 5^i and 2^k/5^i are generated exactly at build time
 * (msprobe_atb/tree/_build_ingest.py writes ing_pow5.h). */
#ifndef ING_SHORTEST_H
#define ING_SHORTEST_H

#include <stddef.h>

/* Longest repr: "-2.2250738585072014e-308" is 24 characters. */
#define ING_REPR_MAX 32

/* Writes repr(v) to out (at least ING_REPR_MAX bytes, not terminated) and
 * returns its length: "0.1", "-0.0", "1e-05", "1e+16", "1000000000000000.0",
 * "inf", "-inf", "nan". */
size_t ing_repr(double v, char *out);

#endif
