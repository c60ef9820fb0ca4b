/* The aclDataType numbering ATB passes to SaveTensor as a decimal string
 * (docs/msprobe_format.md §7): element width and the name used in records and the CSV. */
#ifndef MSP_DTYPE_H
#define MSP_DTYPE_H

#include <stddef.h>
#include <stdint.h>

enum {
    MSP_DT_FLOAT = 0, MSP_DT_FLOAT16 = 1, MSP_DT_INT8 = 2, MSP_DT_INT32 = 3,
    MSP_DT_UINT8 = 4, MSP_DT_INT16 = 6, MSP_DT_UINT16 = 7, MSP_DT_UINT32 = 8,
    MSP_DT_INT64 = 9, MSP_DT_UINT64 = 10, MSP_DT_DOUBLE = 11, MSP_DT_BOOL = 12,
    MSP_DT_STRING = 13, MSP_DT_COMPLEX64 = 16, MSP_DT_COMPLEX128 = 17,
    MSP_DT_BF16 = 27, MSP_DT_INT4 = 29, MSP_DT_UINT1 = 30, MSP_DT_COMPLEX32 = 33,
    MSP_DT_HIFLOAT8 = 34, MSP_DT_FLOAT8_E5M2 = 35, MSP_DT_FLOAT8_E4M3FN = 36,
    MSP_DT_FLOAT8_E8M0 = 37, MSP_DT_FLOAT6_E3M2 = 38, MSP_DT_FLOAT6_E2M3 = 39,
    MSP_DT_FLOAT4_E2M1 = 40, MSP_DT_FLOAT4_E1M2 = 41,
};

/* Name of a dtype ("float16", ...), or NULL if the number is unknown. */
const char *msp_dtype_name(int dtype);
/* Bits per element; 0 when unknown or not a fixed width (string, fp6). */
unsigned msp_dtype_bits(int dtype);
/* ATB's decimal string of an enum value (format, dtype): 1 and *out if it is
 * [-]digits, at most 16 characters, within the int range (a longer one would
 * wrap in atoi, and the stats would then be computed for another dtype than
 * the record names); else 0. */
int msp_enum_value(const char *s, size_t n, int *out);

#endif
