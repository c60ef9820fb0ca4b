// Tensor contents, prepared once before the devices fork (the children share
// the pages): random normal-ish floats in the models' dtype, small integers
// for ids, lengths and tables. The shim computes its statistics over them.
#ifndef LOADGEN_PAYLOAD_H
#define LOADGEN_PAYLOAD_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tree.h"

namespace loadgen {

class Payload {
public:
    // Points every tensor of the models at contents of its dtype and size
    // (weights and caches only `withState`: they are never saved otherwise);
    // each tensor starts at another offset, so no two hold the same bytes
    // (with task "all" identical tensors of one op would be hard links).
    void Bind(std::vector<Model> &models, bool withState);

private:
    std::map<std::string, std::vector<uint8_t>> buffers_; // per ATB dtype code
};

} // namespace loadgen

#endif
