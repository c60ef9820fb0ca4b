/*
 * ATB's placeholder definitions of the atb::Probe hooks (docs/atb_hooks.md §1.1).
 * They live in their own translation unit, as in ATB, so every call from the
 * runtime goes through the PLT and an LD_PRELOAD probe replaces them.
 */
#include "internal.h"

namespace atb {

bool Probe::IsTensorNeedSave(const std::vector<int64_t> &ids, const std::string &opType)
{
    (void)ids;
    (void)opType;
    return false;
}

bool Probe::IsSaveTensorData() { return false; }
bool Probe::IsSaveTensorDesc() { return false; }
bool Probe::IsExecuteCountInRange(const uint64_t executeCount)
{
    (void)executeCount;
    return false;
}
bool Probe::IsSaveTensorBefore() { return false; }
bool Probe::IsSaveTensorAfter() { return false; }

void Probe::SaveTensor(const std::string &format, const std::string &dtype, const std::string &dims,
                       const void *hostData, uint64_t dataSize, const std::string &filePath)
{
    (void)format, (void)dtype, (void)dims, (void)hostData, (void)dataSize, (void)filePath;
}

bool Probe::IsSaveTiling() { return false; }

void Probe::SaveTiling(const uint8_t *data, uint64_t dataSize, const std::string &filePath)
{
    (void)data, (void)dataSize, (void)filePath;
}

bool Probe::ReportOperationIOTensorEnable() { return false; }
bool Probe::ReportOperationStatisticEnable() { return false; }

void Probe::ReportOperationSetupStatistic(const uint64_t executeCount, const std::string &opname,
                                          const std::string &st)
{
    (void)executeCount, (void)opname, (void)st;
}

void Probe::ReportOperationExecuteStatistic(const uint64_t executeCount, const std::string &opname,
                                            const std::string &st)
{
    (void)executeCount, (void)opname, (void)st;
}

bool Probe::ReportKernelIOTensorEnable() { return false; }

void Probe::ReportOperationIOTensor(const size_t executeCount, const std::string &opName,
                                    const std::string &opParam,
                                    const std::vector<Probe::Tensor> &tensors,
                                    const std::vector<Probe::Tensor> &outTensors)
{
    (void)executeCount, (void)opName, (void)opParam, (void)tensors, (void)outTensors;
}

bool Probe::ReportOperationGraphEnable() { return false; }

void Probe::ReportKernelIOTensor(const size_t executeCount, const std::string &opName,
                                 const std::string &opParam,
                                 const std::vector<Probe::Tensor> &tensors,
                                 const std::vector<Probe::Tensor> &outTensors)
{
    (void)executeCount, (void)opName, (void)opParam, (void)tensors, (void)outTensors;
}

static void FillProbeTensor(const TensorDesc &desc, Probe::Tensor &probeTensor,
                            const std::string &filePath)
{
    probeTensor.dtype = atbsim::DTypeName(desc.dtype);
    probeTensor.format = atbsim::FormatName(desc.format);
    probeTensor.shape = atbsim::DimsString(desc.dims);
    probeTensor.filePath = filePath;
}

void Probe::AsdopsTensorToProbeTensor(const Mki::Tensor &tensor, Probe::Tensor &probeTensor,
                                      const std::string &filePath)
{
    FillProbeTensor(tensor.desc, probeTensor, filePath);
}

void Probe::AtbTensorToProbeTensor(const atb::Tensor &tensor, Probe::Tensor &probeTensor,
                                   const std::string &filePath)
{
    FillProbeTensor(tensor.desc, probeTensor, filePath);
}

void Probe::ReportOperationGraph(const std::string &opName, const std::string &graph)
{
    (void)opName, (void)graph;
}

void Probe::SaveParam(const std::string &param, const std::string &filePath)
{
    (void)param, (void)filePath;
}

bool Probe::IsSaveParam() { return false; }
bool Probe::IsOverflowCheck() { return false; }
bool Probe::IsOverflowStop() { return false; }

void Probe::ReportOverflowKernel(const std::string &kernelPath) { (void)kernelPath; }

void Probe::UpdateConfig() {}

/* The only predicate whose default is true (ATB 2025-10-17). */
bool Probe::IsSaveTensorInSpecificDir(const std::string &tensorDir)
{
    (void)tensorDir;
    return true;
}

}  // namespace atb
