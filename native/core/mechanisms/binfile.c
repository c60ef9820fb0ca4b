/* The Mki BinFile header written before each tensor's payload (binfile.h). */
#include "binfile.h"

#include <stdio.h>

int msp_bin_header(char *buf, size_t cap, const char *format, const char *dtype,
                   const char *dims, uint64_t size, const char *alias)
{
    unsigned long long n = alias ? 0 : (unsigned long long)size;
    int len;
    if (alias)
        len = snprintf(buf, cap,
                       "$Version=1.0\n$Object.Count=0\n$Object.Length=0\n"
                       "format=%s\ndtype=%s\ndims=%s\ndata=%s\n$End=1\n",
                       format, dtype, dims, alias);
    else
        len = snprintf(buf, cap,
                       "$Version=1.0\n$Object.Count=1\n$Object.Length=%llu\n"
                       "format=%s\ndtype=%s\ndims=%s\n$Object.data=0,%llu\n$End=1\n",
                       n, format, dtype, dims, n);
    return (len < 0 || (size_t)len >= cap) ? -1 : len;
}
