/* The calling thread's device, from the host's real ACL runtime. */
#ifndef MSP_ACL_H
#define MSP_ACL_H

#include <stdint.h>

/* Device of the calling thread from aclrtGetDevice (looked up once with
 * dlsym), or -1. */
int64_t msp_acl_device(void);

#endif
