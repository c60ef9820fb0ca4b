/* The calling thread's device, asked of the host's own ACL runtime (found with dlsym,
 * once). */
#define _GNU_SOURCE
#include "acl.h"

#include <dlfcn.h>
#include <pthread.h>

typedef int (*acl_get_device_fn)(int32_t *);
static acl_get_device_fn g_acl_get_device;
static pthread_once_t g_acl_once = PTHREAD_ONCE_INIT;

static void find_acl(void)
{
    g_acl_get_device = (acl_get_device_fn)dlsym(RTLD_DEFAULT, "aclrtGetDevice");
}

int64_t msp_acl_device(void)
{
    pthread_once(&g_acl_once, find_acl);
    int32_t dev = -1;
    if (!g_acl_get_device || g_acl_get_device(&dev) != 0)
        return -1;
    return dev;
}
