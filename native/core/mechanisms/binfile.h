/* The Mki BinFile header of docs/msprobe_format.md §7 / docs/contracts.md §6. */
#ifndef MSP_BINFILE_H
#define MSP_BINFILE_H

#include <stddef.h>
#include <stdint.h>

/* Room for a .bin header (or stub) as the writers build it. */
#define MSP_BIN_HEADER_CAP 4096

/* Writes the header of a .bin with `size` payload bytes into buf. With
 * alias != NULL it is a dedup stub instead: $Object.Count=0,
 * $Object.Length=0, an extra `data=<alias>` attribute and no data object
 * (and no payload follows). Returns the header length, or -1 if cap is
 * too small. */
int msp_bin_header(char *buf, size_t cap, const char *format, const char *dtype,
                   const char *dims, uint64_t size, const char *alias);
/* The same (no stub) from views: format, dtype and dims of the given lengths. */
int msp_bin_header_n(char *buf, size_t cap, const char *format, size_t formatn,
                     const char *dtype, size_t dtypen, const char *dims, size_t dimsn,
                     uint64_t size);

#endif
