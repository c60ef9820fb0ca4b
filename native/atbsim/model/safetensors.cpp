#include "safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <set>

#include "json.h"
#include "smallfile.h"

namespace atbsim_lm {

namespace {

// What a header can need: a Llama shard's is well under 1 MiB (about 110 bytes a tensor;
// the format itself allows 100 MiB, which the JSON reader would take to gigabytes).
constexpr uint64_t kMaxHeader = 8u << 20;
// An index maps each tensor name to its shard: tens of KiB for a 70B model.
constexpr size_t kMaxIndex = 16u << 20;
constexpr double kMaxExact = 9007199254740992.0;  // 2^53: integers a double holds exactly

bool whole_number(const JsonValue *v, uint64_t *out) {
    if (!v || v->kind != JsonValue::Number || !(v->num >= 0) || v->num > kMaxExact || std::floor(v->num) != v->num)
        return false;
    *out = static_cast<uint64_t>(v->num);
    return true;
}

}  // namespace

size_t safetensors_dtype_size(const std::string &dtype) {
    static const std::map<std::string, size_t> sizes = {
        {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
        {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8}};
    auto it = sizes.find(dtype);
    return it == sizes.end() ? 0 : it->second;
}

struct SafetensorsDir::Mapping {
    void *addr = nullptr;
    size_t size = 0;
    ~Mapping() {
        if (addr) munmap(addr, size);
    }
};

SafetensorsDir::~SafetensorsDir() = default;

const SafeTensor *SafetensorsDir::find(const std::string &name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
}

bool SafetensorsDir::add_file(const std::string &path, std::string *err) {
    std::string why;
    int fd = open_regular(path, &why);
    if (fd < 0) return *err = path + ": " + why, false;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        ::close(fd);
        return *err = path + ": " + std::strerror(errno), false;
    }
    auto map = std::make_unique<Mapping>();
    map->size = static_cast<size_t>(st.st_size);
    if (map->size > 0) {
        void *addr = mmap(nullptr, map->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (addr != MAP_FAILED) map->addr = addr;
    }
    int saved = errno;
    ::close(fd);
    if (map->size > 0 && !map->addr) return *err = path + ": cannot map the file: " + std::strerror(saved), false;
    const auto *bytes = static_cast<const unsigned char *>(map->addr);
    if (map->size < 8) return *err = path + ": " + std::to_string(map->size) + " bytes, too short for a safetensors file", false;
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--) header_len = header_len << 8 | bytes[i];  // little-endian
    if (header_len > kMaxHeader)
        return *err = path + ": a header of " + std::to_string(header_len) + " bytes, more than the " +
                      std::to_string(kMaxHeader) + " a checkpoint's header needs; refused",
               false;
    if (header_len > map->size - 8)
        return *err = path + ": the header length " + std::to_string(header_len) + " does not fit the file (" +
                      std::to_string(map->size) + " bytes); not a safetensors file, or truncated",
               false;
    JsonValue header;
    if (!json_parse(std::string(reinterpret_cast<const char *>(bytes) + 8, header_len), &header, &why))
        return *err = path + ": the header is not valid JSON (" + why + ")", false;
    if (header.kind != JsonValue::Object) return *err = path + ": the header is not a JSON object", false;
    const unsigned char *body = bytes + 8 + header_len;
    const uint64_t body_size = map->size - 8 - header_len;
    for (const auto &kv : header.obj) {
        if (kv.first == "__metadata__") continue;
        const std::string where = path + ": tensor '" + kv.first + "'";
        const JsonValue &e = kv.second;
        const JsonValue *dtype = e.get("dtype"), *shape = e.get("shape"), *offsets = e.get("data_offsets");
        if (!dtype || dtype->kind != JsonValue::String || !shape || shape->kind != JsonValue::Array || !offsets ||
            offsets->kind != JsonValue::Array || offsets->arr.size() != 2)
            return *err = where + ": the header entry needs dtype, shape and data_offsets [begin, end]", false;
        SafeTensor t;
        t.name = kv.first;
        t.dtype = dtype->str;
        t.file = path;
        uint64_t numel = 1, begin = 0, end = 0;
        for (const JsonValue &d : shape->arr) {
            uint64_t n = 0;
            if (!whole_number(&d, &n)) return *err = where + ": the shape holds a value that is not a whole number", false;
            numel = n == 0 || numel <= body_size / n ? numel * n : body_size + 1;  // saturates past the file
            t.shape.push_back(static_cast<int64_t>(n));
        }
        if (!whole_number(&offsets->arr[0], &begin) || !whole_number(&offsets->arr[1], &end) || begin > end ||
            end > body_size)
            return *err = where + ": data_offsets lie outside the file's " + std::to_string(body_size) + " data bytes",
                   false;
        size_t esize = safetensors_dtype_size(t.dtype);
        if (esize && (numel > body_size || numel * esize != end - begin))
            return *err = where + ": " + std::to_string(end - begin) + " bytes for a " + t.dtype + " tensor of " +
                          (numel > body_size ? std::string("more") : std::to_string(numel)) + " elements",
                   false;
        t.data = body + begin;
        t.bytes = static_cast<size_t>(end - begin);
        if (tensors_.count(t.name)) return *err = where + ": also in " + tensors_[t.name].file, false;
        tensors_[t.name] = std::move(t);
    }
    files_.push_back(std::move(map));
    return true;
}

std::unique_ptr<SafetensorsDir> SafetensorsDir::open(const std::string &dir, std::string *err) {
    std::unique_ptr<SafetensorsDir> out(new SafetensorsDir());
    const std::string single = dir + "/model.safetensors", index = single + ".index.json";
    if (access(single.c_str(), F_OK) == 0) return out->add_file(single, err) ? std::move(out) : nullptr;
    if (access(index.c_str(), F_OK) != 0) {
        *err = dir + ": neither model.safetensors nor model.safetensors.index.json (atbsim reads safetensors "
                     "checkpoints only; save with safe_serialization=True)";
        return nullptr;
    }
    std::string text, why;
    JsonValue doc;
    if (!read_small_file(index, kMaxIndex, &text, &why)) return *err = index + ": " + why, nullptr;
    if (!json_parse(text, &doc, &why)) return *err = index + ": not valid JSON (" + why + ")", nullptr;
    const JsonValue *map = doc.get("weight_map");
    if (!map || map->kind != JsonValue::Object)
        return *err = index + ": no \"weight_map\" object of tensor name -> shard file", nullptr;
    std::set<std::string> shards;
    for (const auto &kv : map->obj) {
        const std::string &file = kv.second.str;
        if (kv.second.kind != JsonValue::String || file.empty() || file.find('/') != std::string::npos || file == "." ||
            file == "..")
            return *err = index + ": tensor '" + kv.first + "' maps to '" + file + "', not a file name in " + dir, nullptr;
        shards.insert(file);
    }
    for (const std::string &file : shards)
        if (!out->add_file(dir + "/" + file, err)) return nullptr;
    for (const auto &kv : map->obj) {
        const SafeTensor *t = out->find(kv.first);
        if (!t || t->file != dir + "/" + kv.second.str)
            return *err = index + ": tensor '" + kv.first + "' is not in its shard " + kv.second.str, nullptr;
    }
    return out;
}

}  // namespace atbsim_lm
