// The hook surface as ATB declares it: atb::Probe as in ATB's
// src/atb/utils/probe.h and atb_speed::SpeedProbe as in ATB-Models, with the
// same static members and parameter types, so the mangled names match
// docs/atb_hooks.md §1.3. Written here, independently of any ATB header.
// MSP_HOOK is the export attribute when included by the adapter, empty for
// test programs that call the hooks.
#ifndef MSPROBE_ATB_PROBE_DECL_H
#define MSPROBE_ATB_PROBE_DECL_H

#include <cstdint>
#include <string>
#include <vector>

#ifndef MSP_HOOK
#define MSP_HOOK
#endif

namespace atb {
class Probe {
public:
    struct Tensor {
        std::string dtype;
        std::string format;
        std::string shape;
        std::string filePath;
    };
    MSP_HOOK static bool IsTensorNeedSave(const std::vector<int64_t> &ids, const std::string &opType);
    MSP_HOOK static bool IsSaveTensorData();
    MSP_HOOK static bool IsSaveTensorDesc();
    MSP_HOOK static bool IsExecuteCountInRange(const uint64_t executeCount);
    MSP_HOOK static bool IsSaveTensorBefore();
    MSP_HOOK static bool IsSaveTensorAfter();
    MSP_HOOK static void SaveTensor(const std::string &format, const std::string &dtype,
                                    const std::string &dims, const void *hostData,
                                    uint64_t dataSize, const std::string &filePath);
    MSP_HOOK static bool IsSaveTiling();
    MSP_HOOK static void SaveTiling(const uint8_t *data, uint64_t dataSize,
                                    const std::string &filePath);
    MSP_HOOK static bool ReportOperationIOTensorEnable();
    MSP_HOOK static bool ReportOperationStatisticEnable();
    MSP_HOOK static bool ReportKernelIOTensorEnable();
    MSP_HOOK static void ReportOperationSetupStatistic(const uint64_t executeCount,
                                                       const std::string &opname,
                                                       const std::string &st);
    MSP_HOOK static void ReportOperationExecuteStatistic(const uint64_t executeCount,
                                                         const std::string &opname,
                                                         const std::string &st);
    MSP_HOOK static void ReportOperationIOTensor(const size_t executeCount,
                                                 const std::string &opName,
                                                 const std::string &opParam,
                                                 const std::vector<Tensor> &inTensors,
                                                 const std::vector<Tensor> &outTensors);
    MSP_HOOK static void ReportKernelIOTensor(const size_t executeCount, const std::string &opName,
                                              const std::string &opParam,
                                              const std::vector<Tensor> &inTensors,
                                              const std::vector<Tensor> &outTensors);
    MSP_HOOK static void SaveParam(const std::string &param, const std::string &filePath);
    MSP_HOOK static bool IsSaveParam();
    MSP_HOOK static bool ReportOperationGraphEnable();
    MSP_HOOK static void ReportOperationGraph(const std::string &opName,
                                              const std::string &graph);
    MSP_HOOK static bool IsOverflowCheck();
    MSP_HOOK static bool IsOverflowStop();
    MSP_HOOK static void ReportOverflowKernel(const std::string &kernelPath);
    MSP_HOOK static void UpdateConfig();
    MSP_HOOK static bool IsSaveTensorInSpecificDir(const std::string &tensorDir);
    // Legacy msProbe extras that older ATB releases may still call; the
    // values are msProbe's (harmless: current ATB does not declare them).
    MSP_HOOK static bool IsSaveChild();
    MSP_HOOK static bool IsSaveIntensor();
    MSP_HOOK static bool IsSaveOuttensor();
};

} // namespace atb

namespace atb_speed {
class SpeedProbe {
public:
    MSP_HOOK static bool IsReportModelTopoInfo(const std::string &modelName);
    MSP_HOOK static void ReportModelTopoInfo(const std::string &modelName,
                                             const std::string &graph);
};
} // namespace atb_speed

#endif
