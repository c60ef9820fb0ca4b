/* StoreUtil: how tensors reach Probe::SaveTensor (docs/atb_hooks.md §6). */
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>

#include "internal.h"

namespace atbsim {
namespace {

/* Test aid: ATBSIM_SAVE_TRACE=<file> appends one JSON line per SaveTensor
 * call, written before the call, so a test can check what the probe got. */
class SaveTrace {
public:
    static SaveTrace &Get()
    {
        static SaveTrace trace;
        return trace;
    }

    void Write(const std::string &path, const std::string &format, const std::string &dtype,
               const std::string &dims, const void *data, uint64_t size)
    {
        if (file_ == nullptr) {
            return;
        }
        uint64_t h = 0xcbf29ce484222325ULL;  /* FNV-1a 64 */
        const auto *p = static_cast<const unsigned char *>(data);
        for (uint64_t i = 0; i < size; ++i) {
            h = (h ^ p[i]) * 0x100000001b3ULL;
        }
        char hex[17];
        std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
        Json line = Json::Object();
        line.Set("path", Json::Str(path))
            .Set("format", Json::Str(format))
            .Set("dtype", Json::Str(dtype))
            .Set("dims", Json::Str(dims))
            .Set("size", Json::Int(static_cast<int64_t>(size)))
            .Set("fnv1a64", Json::Str(hex));
        std::lock_guard<std::mutex> lock(mu_);
        std::fprintf(file_, "%s\n", line.Dump().c_str());
        std::fflush(file_);
    }

private:
    SaveTrace()
    {
        const char *path = std::getenv("ATBSIM_SAVE_TRACE");
        if (path != nullptr && *path != '\0') {
            file_ = std::fopen(path, "ae");
            if (file_ == nullptr) {
                LogError(std::string("cannot open ATBSIM_SAVE_TRACE file ") + path + ": " +
                         std::strerror(errno));
            }
        }
    }
    std::FILE *file_ = nullptr;
    std::mutex mu_;
};

/* Through a volatile pointer so the compiler cannot drop the store before free(). */
void *(*volatile g_poison)(void *, int, size_t) = std::memset;

/* SaveOne: a synchronous D2H copy into a temporary host buffer that is
 * poisoned and freed as soon as SaveTensor returns, as ATB frees its vector:
 * a probe that keeps the pointer instead of copying is caught. */
void SaveOne(const TensorDesc &desc, const void *deviceData, uint64_t size, const std::string &path)
{
    void *host = size != 0 ? std::malloc(size) : nullptr;
    if (size != 0 && host == nullptr) {
        LogError("out of host memory saving " + path);
        return;
    }
    if (aclrtMemcpy(host, size, deviceData, size, ACL_MEMCPY_DEVICE_TO_HOST) != ACL_SUCCESS) {
        LogError("aclrtMemcpy device to host failed, tensor not saved: " + path);
        std::free(host);
        return;
    }
    const std::string format = std::to_string(desc.format);
    const std::string dtype = std::to_string(desc.dtype);
    const std::string dims = DimsString(desc.dims);
    SaveTrace::Get().Write(path, format, dtype, dims, host, size);
    try {
        atb::Probe::SaveTensor(format, dtype, dims, host, size, path);
    } catch (const std::exception &e) {
        LogError("Probe::SaveTensor threw for " + path + ": " + e.what());
    } catch (...) {
        LogError("Probe::SaveTensor threw for " + path);
    }
    if (host != nullptr) {
        g_poison(host, 0xA5, size);
    }
    std::free(host);
}

std::string TensorFile(const std::string &dir, const char *kind, size_t i,
                       const std::vector<std::string> &irNames)
{
    std::string path = dir + "/" + kind + std::to_string(i);
    if (i < irNames.size() && !irNames[i].empty()) {
        path += "_" + irNames[i];
    }
    return path + ".bin";
}

void SyncIfData(aclrtStream stream)
{
    /* IsSaveTensorData only decides the sync; the saves happen regardless. */
    if (atb::Probe::IsSaveTensorData()) {
        aclrtSynchronizeStream(stream);
    }
}

const std::vector<std::string> kNoIrNames;

}  // namespace

void SaveTensors(const std::string &dir, const std::vector<Tensor> &in,
                 const std::vector<Tensor> &out, const std::vector<std::string> &inIrNames,
                 const std::vector<std::string> &outIrNames, aclrtStream stream)
{
    SyncIfData(stream);
    for (size_t i = 0; i < in.size(); ++i) {
        SaveOne(in[i].desc, in[i].deviceData, in[i].dataSize,
                TensorFile(dir, "intensor", i, inIrNames));
    }
    for (size_t i = 0; i < out.size(); ++i) {
        SaveOne(out[i].desc, out[i].deviceData, out[i].dataSize,
                TensorFile(dir, "outtensor", i, outIrNames));
    }
}

void SaveKernelTensors(const std::string &dir, const std::vector<Mki::Tensor> &in,
                       const std::vector<Mki::Tensor> &out, aclrtStream stream)
{
    SyncIfData(stream);
    for (size_t i = 0; i < in.size(); ++i) {
        SaveOne(in[i].desc, in[i].data, in[i].dataSize, TensorFile(dir, "intensor", i, kNoIrNames));
    }
    for (size_t i = 0; i < out.size(); ++i) {
        SaveOne(out[i].desc, out[i].data, out[i].dataSize,
                TensorFile(dir, "outtensor", i, kNoIrNames));
    }
}

}  // namespace atbsim
