/* The aclDataType table: each code's name and element width (dtype.h). */
#include "dtype.h"

#include <stddef.h>

struct dt {
    int code;
    unsigned bits;
    const char *name;
};

static const struct dt table[] = {
    {MSP_DT_FLOAT, 32, "float"},        {MSP_DT_FLOAT16, 16, "float16"},
    {MSP_DT_INT8, 8, "int8"},           {MSP_DT_INT32, 32, "int32"},
    {MSP_DT_UINT8, 8, "uint8"},         {MSP_DT_INT16, 16, "int16"},
    {MSP_DT_UINT16, 16, "uint16"},      {MSP_DT_UINT32, 32, "uint32"},
    {MSP_DT_INT64, 64, "int64"},        {MSP_DT_UINT64, 64, "uint64"},
    {MSP_DT_DOUBLE, 64, "double"},      {MSP_DT_BOOL, 8, "bool"},
    {MSP_DT_STRING, 0, "string"},       {MSP_DT_COMPLEX64, 64, "complex64"},
    {MSP_DT_COMPLEX128, 128, "complex128"}, {MSP_DT_BF16, 16, "bf16"},
    {MSP_DT_INT4, 4, "int4"},           {MSP_DT_UINT1, 1, "uint1"},
    {MSP_DT_COMPLEX32, 32, "complex32"}, {MSP_DT_HIFLOAT8, 8, "hifloat8"},
    {MSP_DT_FLOAT8_E5M2, 8, "float8_e5m2"}, {MSP_DT_FLOAT8_E4M3FN, 8, "float8_e4m3fn"},
    {MSP_DT_FLOAT8_E8M0, 8, "float8_e8m0"}, {MSP_DT_FLOAT6_E3M2, 0, "float6_e3m2"},
    {MSP_DT_FLOAT6_E2M3, 0, "float6_e2m3"}, {MSP_DT_FLOAT4_E2M1, 4, "float4_e2m1"},
    {MSP_DT_FLOAT4_E1M2, 4, "float4_e1m2"},
};

static const struct dt *find(int code)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].code == code)
            return &table[i];
    return NULL;
}

const char *msp_dtype_name(int dtype)
{
    const struct dt *d = find(dtype);
    return d ? d->name : NULL;
}

unsigned msp_dtype_bits(int dtype)
{
    const struct dt *d = find(dtype);
    return d ? d->bits : 0;
}

int msp_enum_value(const char *s, size_t n, int *out)
{
    size_t i = n && s[0] == '-' ? 1 : 0;
    if (i == n || n > 16)
        return 0;
    int64_t v = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (s[i] - '0'); /* at most 16 digits: no int64 overflow */
    }
    if (s[0] == '-')
        v = -v;
    if (v < INT32_MIN || v > INT32_MAX)
        return 0;
    *out = (int)v;
    return 1;
}
