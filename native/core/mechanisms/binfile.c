/* The Mki BinFile header written before each tensor's payload (binfile.h). */
#include "binfile.h"

#include <stdio.h>
#include <string.h>

/* The header of a tensor's .bin, from views (format, dtype and dims need
 * not end in NUL); both forms below print through it. */
static int header_n(char *buf, size_t cap, const char *format, size_t formatn, const char *dtype,
                    size_t dtypen, const char *dims, size_t dimsn, uint64_t size,
                    const char *alias)
{
    unsigned long long n = alias ? 0 : (unsigned long long)size;
    int len;
    if (alias)
        len = snprintf(buf, cap,
                       "$Version=1.0\n$Object.Count=0\n$Object.Length=0\n"
                       "format=%.*s\ndtype=%.*s\ndims=%.*s\ndata=%s\n$End=1\n",
                       (int)formatn, format, (int)dtypen, dtype, (int)dimsn, dims, alias);
    else
        len = snprintf(buf, cap,
                       "$Version=1.0\n$Object.Count=1\n$Object.Length=%llu\n"
                       "format=%.*s\ndtype=%.*s\ndims=%.*s\n$Object.data=0,%llu\n$End=1\n",
                       n, (int)formatn, format, (int)dtypen, dtype, (int)dimsn, dims, n);
    return (len < 0 || (size_t)len >= cap) ? -1 : len;
}

int msp_bin_header(char *buf, size_t cap, const char *format, const char *dtype,
                   const char *dims, uint64_t size, const char *alias)
{
    return header_n(buf, cap, format, strlen(format), dtype, strlen(dtype), dims, strlen(dims),
                    size, alias);
}

int msp_bin_header_n(char *buf, size_t cap, const char *format, size_t formatn,
                     const char *dtype, size_t dtypen, const char *dims, size_t dimsn,
                     uint64_t size)
{
    return header_n(buf, cap, format, formatn, dtype, dtypen, dims, dimsn, size, NULL);
}
