/* The saves, SaveTensor and SaveParam: what ATB hands over is checked,
 * counted pending for its round, copied into the queue (or, the flight
 * recorder armed, into its ring) and left to the writers. */
#ifndef MSP_SAVE_H
#define MSP_SAVE_H

#include <stdint.h>

#include "hooks.h"

#ifdef __cplusplus
extern "C" {
#endif

void msp_hook_save_tensor(msp_sv format, msp_sv dtype, msp_sv dims, const void *host, uint64_t size,
                          msp_sv path);
void msp_hook_save_param(msp_sv param, msp_sv path);

#ifdef __cplusplus
}
#endif

#endif
