/* One round of an XXH64 lane (msprobe_atb/content_hash.h): shared by the
 * hash itself and the statistics' vector pass, which folds the stripes it
 * reads into the lanes in the same loop (stats_simd.c). */
#ifndef MSP_HASH_LANE_H
#define MSP_HASH_LANE_H

#include <stdint.h>
#include <string.h>

#define MSP_XXH_P1 0x9E3779B185EBCA87ULL
#define MSP_XXH_P2 0xC2B2AE3D27D4EB4FULL

/* The lane `acc` after 8 more bytes of input. */
static inline uint64_t msp_hash_round(uint64_t acc, uint64_t input)
{
    acc += input * MSP_XXH_P2;
    acc = (acc << 31) | (acc >> 33);
    return acc * MSP_XXH_P1;
}

/* The same for the 8 bytes at p, read little-endian and unaligned (x86-64
 * and aarch64 are little-endian). */
static inline uint64_t msp_hash_lane(uint64_t acc, const unsigned char *p)
{
    uint64_t input;
    memcpy(&input, p, sizeof input);
    return msp_hash_round(acc, input);
}

#endif
