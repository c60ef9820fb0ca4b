// A reader of safetensors checkpoints: one `model.safetensors`, or the shards a
// `model.safetensors.index.json` names. Files are mapped, not read, so opening a
// checkpoint costs its headers only; every header is checked against its file
// before a tensor is handed out, so a truncated or crafted file is an error, not
// a read past the end.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace atbsim_lm {

// One tensor of a checkpoint: its dtype as the header spells it ("F32", "BF16", ...),
// its shape, and its bytes inside the mapped file (not aligned: copy before use).
struct SafeTensor {
    std::string name;
    std::string dtype;
    std::vector<int64_t> shape;
    const unsigned char *data = nullptr;
    size_t bytes = 0;
    std::string file;  // for messages
};

class SafetensorsDir {
public:
    // Opens DIR/model.safetensors, or else DIR/model.safetensors.index.json and its shards.
    // nullptr with *err naming the file and the problem.
    static std::unique_ptr<SafetensorsDir> open(const std::string &dir, std::string *err);
    ~SafetensorsDir();
    SafetensorsDir(const SafetensorsDir &) = delete;
    SafetensorsDir &operator=(const SafetensorsDir &) = delete;

    const SafeTensor *find(const std::string &name) const;  // nullptr if absent

private:
    struct Mapping;
    SafetensorsDir() = default;
    bool add_file(const std::string &path, std::string *err);

    std::vector<std::unique_ptr<Mapping>> files_;
    std::map<std::string, SafeTensor> tensors_;
};

// Bytes of one element of a safetensors dtype; 0 for a dtype this reader does not know.
size_t safetensors_dtype_size(const std::string &dtype);

}  // namespace atbsim_lm
