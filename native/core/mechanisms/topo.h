/* IsReportModelTopoInfo's memory: which model names were reported. */
#ifndef MSP_TOPO_H
#define MSP_TOPO_H

#include <stddef.h>

/* 1 the first time a model name is seen in this process (lock-free fixed
 * table of name hashes, no allocation). */
int msp_topo_first(const char *name, size_t n);
/* Forgets every name (a forked child reports its models again). */
void msp_topo_reset(void);

#endif
