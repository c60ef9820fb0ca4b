/* The C entry points behind the atb::Probe / atb_speed::SpeedProbe hooks.
 * The C++ adapter (native/adapter/hooks.cpp) forwards each hook here with
 * (pointer, length) views of its std::string / std::vector arguments, so
 * the core never touches a libstdc++ type and is compiled once for both
 * ABIs. Nothing here throws; bad input is logged, counted and survived. */
#ifndef MSP_HOOKS_H
#define MSP_HOOKS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *p;
    size_t n;
} msp_sv;

/* IsTensorNeedSave: its ids/opType arguments are not needed (see hooks.c). */
int msp_hook_is_tensor_need_save(void);
int msp_hook_is_save_tensor_data(void);
int msp_hook_is_save_tensor_desc(void);
int msp_hook_is_execute_count_in_range(uint64_t count);
int msp_hook_is_save_tensor_before(void);
int msp_hook_is_save_tensor_after(void);
void msp_hook_save_tensor(msp_sv format, msp_sv dtype, msp_sv dims, const void *host, uint64_t size,
                          msp_sv path);
int msp_hook_is_save_param(void);
void msp_hook_save_param(msp_sv param, msp_sv path);
int msp_hook_report_graph_enable(void);
void msp_hook_report_graph(msp_sv name, msp_sv json);
int msp_hook_is_overflow_check(void);
void msp_hook_report_overflow_kernel(msp_sv kernel);
void msp_hook_update_config(void);
int msp_hook_is_save_in_dir(msp_sv dir);
int msp_hook_is_report_topo(msp_sv model);
void msp_hook_report_topo(msp_sv model, msp_sv json);

#ifdef __cplusplus
}
#endif

#endif
