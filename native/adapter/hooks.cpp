// The C++ face of the probe: defines ATB's atb::Probe and ATB-Models'
// atb_speed::SpeedProbe static member functions so that their mangled names
// interpose libatb.so's defaults (docs/atb_hooks.md §1).
// Compiled once per libstdc++ ABI (-D_GLIBCXX_USE_CXX11_ABI=0/1). Each hook
// only forwards (pointer, length) views to the C core; with -fno-exceptions
// and only inline std::string/std::vector accessors used, the library needs
// no libstdc++ symbol at all (checked at link time with -z defs).
#include <cstdint>
#include <string>
#include <vector>

#define MSP_HOOK __attribute__((visibility("default")))
#include "atb_probe_decl.h"
#include "hooks.h"
#include "reports.h"
#include "save.h"

extern "C" {
// Read by the core (attach: ABI check, attach record, proc slot).
__attribute__((visibility("hidden"))) extern const int msp_build_abi = _GLIBCXX_USE_CXX11_ABI;
}

namespace {
inline msp_sv sv(const std::string &s)
{
    return msp_sv{s.data(), s.size()};
}
} // namespace

namespace atb {
bool Probe::IsTensorNeedSave(const std::vector<int64_t> &ids, const std::string &name)
{
    uint64_t g = msp_hot_generation();
    if (__builtin_expect(!msp_hook_need_save_asleep(g), 0)) // the vector is read only here
        return msp_hook_need_save_awake(g, ids.data(), ids.data() + ids.size(), sv(name));
    return msp_hook_need_save_answer();
}
bool Probe::IsSaveTensorData() { return msp_hook_is_save_tensor_data(); }
bool Probe::IsSaveTensorDesc() { return msp_hook_is_save_tensor_desc(); }
bool Probe::IsExecuteCountInRange(const uint64_t executeCount)
{
    return msp_hook_is_execute_count_in_range(executeCount);
}
bool Probe::IsSaveTensorBefore() { return msp_hook_is_save_tensor_before(); }
bool Probe::IsSaveTensorAfter() { return msp_hook_is_save_tensor_after(); }
void Probe::SaveTensor(const std::string &format, const std::string &dtype,
                       const std::string &dims, const void *hostData, uint64_t dataSize,
                       const std::string &filePath)
{
    msp_hook_save_tensor(sv(format), sv(dtype), sv(dims), hostData, dataSize, sv(filePath));
}
// ATB passes unreliable tiling pointers (docs/atb_hooks.md §10 item 7)
bool Probe::IsSaveTiling() { return false; }
void Probe::SaveTiling(const uint8_t *, uint64_t, const std::string &) {}
bool Probe::ReportOperationIOTensorEnable() { return false; }
bool Probe::ReportOperationStatisticEnable() { return false; }
bool Probe::ReportKernelIOTensorEnable() { return false; }
void Probe::ReportOperationSetupStatistic(const uint64_t, const std::string &, const std::string &) {}
void Probe::ReportOperationExecuteStatistic(const uint64_t, const std::string &,
                                            const std::string &) {}
void Probe::ReportOperationIOTensor(const size_t, const std::string &, const std::string &,
                                    const std::vector<Tensor> &, const std::vector<Tensor> &) {}
void Probe::ReportKernelIOTensor(const size_t, const std::string &, const std::string &,
                                 const std::vector<Tensor> &, const std::vector<Tensor> &) {}
void Probe::SaveParam(const std::string &param, const std::string &filePath)
{
    msp_hook_save_param(sv(param), sv(filePath));
}
bool Probe::IsSaveParam() { return msp_hook_is_save_param(); }
bool Probe::ReportOperationGraphEnable() { return msp_hook_report_graph_enable(); }
void Probe::ReportOperationGraph(const std::string &opName, const std::string &graph)
{
    msp_hook_report_graph(sv(opName), sv(graph));
}
bool Probe::IsOverflowCheck() { return msp_hook_is_overflow_check(); }
bool Probe::IsOverflowStop() { return false; }
void Probe::ReportOverflowKernel(const std::string &kernelPath)
{
    msp_hook_report_overflow_kernel(sv(kernelPath));
}
void Probe::UpdateConfig() { msp_hook_update_config(); }
bool Probe::IsSaveTensorInSpecificDir(const std::string &tensorDir)
{
    return msp_hook_is_save_in_dir(sv(tensorDir));
}
bool Probe::IsSaveChild() { return false; }
bool Probe::IsSaveIntensor() { return true; }
bool Probe::IsSaveOuttensor() { return true; }
} // namespace atb

namespace atb_speed {

bool SpeedProbe::IsReportModelTopoInfo(const std::string &modelName)
{
    return msp_hook_is_report_topo(sv(modelName));
}
void SpeedProbe::ReportModelTopoInfo(const std::string &modelName, const std::string &graph)
{
    msp_hook_report_topo(sv(modelName), sv(graph));
}
} // namespace atb_speed
