/* The hooks of ATB's reports: the graph and topology JSON (recorded raw for
 * the control plane's info/) and ReportOverflowKernel (the overflow task's
 * event, the flight recorder's overflow trigger). */
#ifndef MSP_REPORTS_H
#define MSP_REPORTS_H

#include "hooks.h"

#ifdef __cplusplus
extern "C" {
#endif

int msp_hook_report_graph_enable(void);
void msp_hook_report_graph(msp_sv name, msp_sv json);
void msp_hook_report_overflow_kernel(msp_sv kernel);
int msp_hook_is_report_topo(msp_sv model);
void msp_hook_report_topo(msp_sv model, msp_sv json);

#ifdef __cplusplus
}
#endif

#endif
