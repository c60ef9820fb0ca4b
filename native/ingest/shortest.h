/* The shortest decimal that reads back as the same double (Ryu's algorithm,
 * Ulf Adams, PLDI 2018), without Python: laid out as Python's repr lays it out
 * (float.__repr__), or the same without an exponent (statistic.csv's cells).
 * One owner: shortest.c. Its tables of 5^i and 2^k/5^i are generated exactly
 * at build time (msprobe_atb/tree/_build_ingest.py writes ing_pow5.h). */
#ifndef ING_SHORTEST_H
#define ING_SHORTEST_H

#include <stddef.h>

/* Longest text: -2.2250738585072014e-308, 24 characters as repr, 327 written
 * positionally ("-0.", 307 zeros, 17 digits). */
#define ING_NUMBER_MAX 336

/* The layouts of the shortest digits: repr's, and repr's without an exponent. */
enum ing_layout { ING_REPR, ING_POSITIONAL };

/* Writes v's shortest round-trip digits in `layout` to out (at least
 * ING_NUMBER_MAX bytes, not terminated) and returns the length. ING_REPR:
 * repr(v): "0.1", "-0.0", "1e-05", "1e+16", "1000000000000000.0"; ING_POSITIONAL:
 * the same digits never with an exponent: "0.00001", "10000000000000000.0".
 * Both: "inf", "-inf", "nan". */
size_t ing_shortest(double v, enum ing_layout layout, char *out);

#endif
