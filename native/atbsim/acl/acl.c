/* Stand-in AscendCL runtime: see include/acl/acl.h. Plain C, ABI-neutral. */
#include "acl/acl.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Real ACL keeps the current device per thread; -1 = none set yet. */
static _Thread_local int32_t g_currentDevice = -1;
static atomic_uint_fast64_t g_syncCount;

aclError aclrtSetDevice(int32_t deviceId)
{
    if (deviceId < 0) {
        return ACL_ERROR_INVALID_PARAM;
    }
    g_currentDevice = deviceId;
    return ACL_SUCCESS;
}

aclError aclrtGetDevice(int32_t *deviceId)
{
    if (deviceId == NULL) {
        return ACL_ERROR_INVALID_PARAM;
    }
    if (g_currentDevice < 0) {
        return ACL_ERROR_RT_CONTEXT_NULL;
    }
    *deviceId = g_currentDevice;
    return ACL_SUCCESS;
}

aclError aclrtResetDevice(int32_t deviceId)
{
    if (deviceId != g_currentDevice) {
        return ACL_ERROR_INVALID_PARAM;
    }
    g_currentDevice = -1;
    return ACL_SUCCESS;
}

aclError aclrtCreateStream(aclrtStream *stream)
{
    if (stream == NULL) {
        return ACL_ERROR_INVALID_PARAM;
    }
    /* A distinct non-NULL handle; nothing is ever queued on it. */
    *stream = malloc(1);
    return *stream != NULL ? ACL_SUCCESS : ACL_ERROR_INVALID_PARAM;
}

aclError aclrtDestroyStream(aclrtStream stream)
{
    free(stream);
    return ACL_SUCCESS;
}

aclError aclrtSynchronizeStream(aclrtStream stream)
{
    (void)stream;
    atomic_fetch_add_explicit(&g_syncCount, 1, memory_order_relaxed);
    return ACL_SUCCESS;
}

aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
                     aclrtMemcpyKind kind)
{
    if (kind < ACL_MEMCPY_HOST_TO_HOST || kind > ACL_MEMCPY_DEVICE_TO_DEVICE || count > destMax) {
        return ACL_ERROR_INVALID_PARAM;
    }
    if (count == 0) {
        return ACL_SUCCESS;
    }
    if (dst == NULL || src == NULL) {
        return ACL_ERROR_INVALID_PARAM;
    }
    memcpy(dst, src, count);
    return ACL_SUCCESS;
}

uint64_t aclsimSyncCount(void)
{
    return atomic_load_explicit(&g_syncCount, memory_order_relaxed);
}
