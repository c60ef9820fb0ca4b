/*
 * The hook surface of atb::Probe (libatb.so) and atb_speed::SpeedProbe
 * (libatb_speed.so), declared exactly as real ATB / ATB-Models do: static
 * members with the same parameter types, so the mangled names (and thus what
 * an LD_PRELOAD probe overrides) are the real ones for each
 * _GLIBCXX_USE_CXX11_ABI value (docs/atb_hooks.md §1.1, §1.3).
 */
#ifndef ATBSIM_ATB_PROBE_H
#define ATBSIM_ATB_PROBE_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace Mki {
struct Tensor;
}

namespace atb {
struct Tensor;

class Probe {
public:
    struct Tensor {
        std::string dtype;
        std::string format;
        std::string shape;
        std::string filePath;
    };

    static bool IsTensorNeedSave(const std::vector<int64_t> &ids, const std::string &opType);
    static bool IsSaveTensorData();
    static bool IsSaveTensorDesc();
    static bool IsExecuteCountInRange(const uint64_t executeCount);
    static bool IsSaveTensorBefore();
    static bool IsSaveTensorAfter();
    static void SaveTensor(const std::string &format, const std::string &dtype,
                           const std::string &dims, const void *hostData, uint64_t dataSize,
                           const std::string &filePath);
    static bool IsSaveTiling();
    static void SaveTiling(const uint8_t *data, uint64_t dataSize, const std::string &filePath);
    static bool ReportOperationIOTensorEnable();
    static bool ReportOperationStatisticEnable();
    static void ReportOperationSetupStatistic(const uint64_t executeCount, const std::string &opname,
                                              const std::string &st);
    static void ReportOperationExecuteStatistic(const uint64_t executeCount,
                                                const std::string &opname, const std::string &st);
    static bool ReportKernelIOTensorEnable();
    static void ReportOperationIOTensor(const size_t executeCount, const std::string &opName,
                                        const std::string &opParam,
                                        const std::vector<Probe::Tensor> &tensors,
                                        const std::vector<Probe::Tensor> &outTensors);
    static bool ReportOperationGraphEnable();
    static void ReportKernelIOTensor(const size_t executeCount, const std::string &opName,
                                     const std::string &opParam,
                                     const std::vector<Probe::Tensor> &tensors,
                                     const std::vector<Probe::Tensor> &outTensors);
    /* Real helpers (not hooks): fill a Probe::Tensor with name strings. */
    static void AsdopsTensorToProbeTensor(const Mki::Tensor &tensor, Probe::Tensor &probeTensor,
                                          const std::string &filePath);
    static void AtbTensorToProbeTensor(const atb::Tensor &tensor, Probe::Tensor &probeTensor,
                                       const std::string &filePath);
    static void ReportOperationGraph(const std::string &opName, const std::string &graph);
    static void SaveParam(const std::string &param, const std::string &filePath);
    static bool IsSaveParam();
    static bool IsOverflowCheck();
    static bool IsOverflowStop();
    static void ReportOverflowKernel(const std::string &kernelPath);
    static void UpdateConfig();
    static bool IsSaveTensorInSpecificDir(const std::string &tensorDir);
};
}  // namespace atb

namespace atb_speed {
class SpeedProbe {
public:
    static bool IsReportModelTopoInfo(const std::string &modelName);
    static void ReportModelTopoInfo(const std::string &modelName, const std::string &graph);
};
}  // namespace atb_speed

#endif
