/* libatb.so internals shared by its translation units (not installed). */
#ifndef ATBSIM_RUNTIME_INTERNAL_H
#define ATBSIM_RUNTIME_INTERNAL_H

#include <memory>
#include <string>
#include <vector>

#include "atb/probe.h"
#include "atbsim/runtime.h"

namespace atbsim {

/* "[atbsim] <msg>" on stderr (errors only; ATB logs through its own logger). */
void LogError(const std::string &msg);

/* Mki::GetStrWithDType / GetStrWithFormat ("float16", "nd", ..., "undefined"). */
std::string DTypeName(int dtype);
std::string FormatName(int format);
/* "a,b,c"; "" for 0-d. */
std::string DimsString(const std::vector<int64_t> &dims);
/* GenerateOperationName: type + "_<id>" per id. */
std::string OperationName(const std::string &type, const std::vector<int64_t> &ids);

/* StoreUtil (docs/atb_hooks.md §6). `irNames` may be empty; kernel saves never pass them. */
void SaveTensors(const std::string &dir, const std::vector<Tensor> &in,
                 const std::vector<Tensor> &out, const std::vector<std::string> &inIrNames,
                 const std::vector<std::string> &outIrNames, aclrtStream stream);
void SaveKernelTensors(const std::string &dir, const std::vector<Mki::Tensor> &in,
                       const std::vector<Mki::Tensor> &out, aclrtStream stream);

class Runner;

struct OpImpl {
    bool isGraph = false;
    std::string name;  /* op name ("LinearOperation" / graph name) */
    std::string runnerName;
    uint32_t inNum = 0;
    uint32_t outNum = 0;
    std::vector<int64_t> ids{-1};
    bool isChild = false;      /* belongs to a graph: never Setup directly */
    bool everSetUp = false;    /* a top-level op that had a Setup call */
    uint64_t opExecuteCount = 0;
    std::unique_ptr<Runner> runner;
    LeafOpSpec leaf;  /* !isGraph */
    GraphSpec graph;  /* isGraph */

    OpImpl();
    ~OpImpl();
    bool InferShape(const std::vector<TensorDesc> &in, std::vector<TensorDesc> &out) const;
    /* SetNodeOperationIds: ids of this op; children get ids + [i]. */
    void SetIds(const std::vector<int64_t> &newIds);
    /* CreateRunner, recursively; asks IsTensorNeedSave for each graph child (post-order). */
    std::unique_ptr<Runner> CreateRunner();
    /* GetGraphInfo() as compact sorted JSON. */
    Json GraphInfo() const;
    /* Param JSON as ATB's GetParamJson: "" when none. */
    const std::string &ParamJson() const;
};

}  // namespace atbsim

#endif
