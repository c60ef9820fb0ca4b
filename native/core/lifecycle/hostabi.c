/* The host libatb.so's C++ ABI, from the SaveTensor symbol it defines, and the
 * message when it is not the shim's (hostabi.h). */
#define _GNU_SOURCE
#include "hostabi.h"

#include <dlfcn.h>

#include "state.h"
#include "util.h"

static const char *const SAVE_TENSOR[2] = {
    "_ZN3atb5Probe10SaveTensorERKSsS2_S2_PKvmS2_",
    "_ZN3atb5Probe10SaveTensorERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEES8_S8_PKvmS8_",
};

/* The host's libatb.so defines SaveTensor under one ABI's mangled name. If
 * it is the other ABI's, only the argument-free hooks reach us. */
int msp_detect_host_abi(void)
{
    int mine = msp_build_abi, other = 1 - mine;
    if (dlsym(RTLD_DEFAULT, SAVE_TENSOR[other]))
        return other;
    if (dlsym(RTLD_NEXT, SAVE_TENSOR[mine]))
        return mine;
    return -1;
}

void msp_report_abi_mismatch(int host)
{
    msp_log("ERROR: C++ ABI mismatch. This process's libatb.so is built with "
            "_GLIBCXX_USE_CXX11_ABI=%d (cxx_abi_%d), but LD_PRELOAD holds libatb_probe_abi%d.so. "
            "ATB's SaveTensor/IsTensorNeedSave calls cannot reach the probe, so NOTHING will be "
            "dumped from this process.",
            host, host, msp_build_abi);
    msp_log("Fix: source the set_env.sh of the ATB install whose ATB_HOME_PATH ends in "
            "cxx_abi_%d (or pass --cxx_abi=%d to it), then source unload_atb_probe.sh and "
            "load_atb_probe.sh again and restart this process.",
            host, host);
}
