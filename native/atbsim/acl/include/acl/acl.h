/*
 * Stand-in for the few AscendCL runtime calls that ATB (and a probe) make.
 * "Device" memory is host memory; streams are opaque handles. The current
 * device is per thread, as with real ACL.
 */
#ifndef ATBSIM_ACL_ACL_H
#define ATBSIM_ACL_ACL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int aclError;
typedef void *aclrtStream;

#define ACL_SUCCESS 0
#define ACL_ERROR_INVALID_PARAM 100000
#define ACL_ERROR_RT_CONTEXT_NULL 107002

typedef enum aclrtMemcpyKind {
    ACL_MEMCPY_HOST_TO_HOST = 0,
    ACL_MEMCPY_HOST_TO_DEVICE = 1,
    ACL_MEMCPY_DEVICE_TO_HOST = 2,
    ACL_MEMCPY_DEVICE_TO_DEVICE = 3,
} aclrtMemcpyKind;

/* Sets / reads the calling thread's current device (error if none was set). */
aclError aclrtSetDevice(int32_t deviceId);
aclError aclrtGetDevice(int32_t *deviceId);
aclError aclrtResetDevice(int32_t deviceId);

aclError aclrtCreateStream(aclrtStream *stream);
aclError aclrtDestroyStream(aclrtStream stream);
/* A no-op that counts its calls (aclsimSyncCount). */
aclError aclrtSynchronizeStream(aclrtStream stream);

/* All kinds are a plain memcpy; fails if dst is too small or a pointer is NULL
 * while count > 0. */
aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
                     aclrtMemcpyKind kind);

/* Stand-in only: number of aclrtSynchronizeStream calls so far (all threads). */
uint64_t aclsimSyncCount(void);

#ifdef __cplusplus
}
#endif

#endif
