/* Which C++ ABI the host's libatb.so was built with, and the message when
 * it is not the shim's. */
#ifndef MSP_HOSTABI_H
#define MSP_HOSTABI_H

/* 0/1 from the mangled SaveTensor name libatb.so defines, -1 if unknown. */
int msp_detect_host_abi(void);
/* Logs why nothing will be dumped and how to fix the environment. */
void msp_report_abi_mismatch(int host_abi);

#endif
