/* Tensors, names and the small JSON writer of the stand-in runtime. */
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "internal.h"

namespace atbsim {

void LogError(const std::string &msg)
{
    std::cerr << "[atbsim] " << msg << std::endl;
}

size_t DTypeSize(int dtype)
{
    switch (dtype) {
        case 0: case 3: case 8: return 4;    /* float, int32, uint32 */
        case 1: case 6: case 7: case 27: return 2;  /* float16, int16, uint16, bf16 */
        case 2: case 4: case 12: return 1;   /* int8, uint8, bool */
        case 9: case 10: case 11: case 16: return 8;  /* int64, uint64, double, complex64 */
        case 17: return 16;                  /* complex128 */
        default: return 0;
    }
}

std::string DTypeName(int dtype)
{
    switch (dtype) {
        case 0: return "float";
        case 1: return "float16";
        case 2: return "int8";
        case 3: return "int32";
        case 4: return "uint8";
        case 6: return "int16";
        case 7: return "uint16";
        case 8: return "uint32";
        case 9: return "int64";
        case 10: return "uint64";
        case 11: return "double";
        case 12: return "bool";
        case 16: return "complex64";
        case 17: return "complex128";
        case 27: return "bf16";
        default: return "undefined";
    }
}

std::string FormatName(int format)
{
    switch (format) {
        case 0: return "nchw";
        case 1: return "nhwc";
        case 2: return "nd";
        case 3: return "nc1hwc0";
        case 4: return "fractal_z";
        case 29: return "fractal_nz";
        default: return "undefined";
    }
}

std::string DimsString(const std::vector<int64_t> &dims)
{
    std::string s;
    for (size_t i = 0; i < dims.size(); ++i) {
        if (i != 0) {
            s += ',';
        }
        s += std::to_string(dims[i]);
    }
    return s;
}

std::string OperationName(const std::string &type, const std::vector<int64_t> &ids)
{
    std::string s = type;
    for (int64_t id : ids) {
        s += '_';
        s += std::to_string(id);
    }
    return s;
}

int64_t NumElements(const std::vector<int64_t> &dims)
{
    int64_t n = 1;
    for (int64_t d : dims) {
        n *= d;
    }
    return n;
}

uint64_t DescBytes(const TensorDesc &d)
{
    int64_t n = NumElements(d.dims);
    return n > 0 ? static_cast<uint64_t>(n) * DTypeSize(d.dtype) : 0;
}

Tensor MakeTensor(const TensorDesc &d)
{
    Tensor t;
    t.desc = d;
    t.dataSize = DescBytes(d);
    /* Never a null pointer, so 0-byte tensors still look allocated. */
    std::shared_ptr<uint8_t> mem(new uint8_t[t.dataSize ? t.dataSize : 1](),
                                 std::default_delete<uint8_t[]>());
    t.deviceData = mem.get();
    t.holder = mem;
    return t;
}

Tensor MakeTensor(int dtype, std::vector<int64_t> dims, int format)
{
    TensorDesc d;
    d.dtype = dtype;
    d.format = format;
    d.dims = std::move(dims);
    return MakeTensor(d);
}

static TensorRef Ref(TensorRef::Kind kind, uint32_t i)
{
    TensorRef r;
    r.kind = kind;
    r.index = i;
    return r;
}
TensorRef In(uint32_t i) { return Ref(TensorRef::IN, i); }
TensorRef Out(uint32_t i) { return Ref(TensorRef::OUT, i); }
TensorRef Tmp(uint32_t i) { return Ref(TensorRef::INTERNAL, i); }

InferShapeFn SameAsInput(uint32_t idx)
{
    return [idx](const std::vector<TensorDesc> &in, std::vector<TensorDesc> &out) {
        if (idx >= in.size()) {
            return false;
        }
        for (TensorDesc &d : out) {
            d = in[idx];
        }
        return true;
    };
}

/* ---- Json ---- */

Json Json::Null() { return Raw("null"); }
Json Json::Bool(bool b) { return Raw(b ? "true" : "false"); }
Json Json::Int(int64_t v) { return Raw(std::to_string(v)); }

Json Json::Num(double v)
{
    if (!std::isfinite(v)) {
        return Null();  /* as nlohmann does */
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return Raw(buf);
}

Json Json::Str(const std::string &s)
{
    std::string out = "\"";
    for (unsigned char c : s) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out += static_cast<char>(c);
                }
        }
    }
    out += '"';
    return Raw(out);
}

Json Json::Raw(const std::string &json)
{
    Json j;
    j.kind_ = RAW;
    j.text_ = json;
    return j;
}

Json Json::Array()
{
    Json j;
    j.kind_ = ARR;
    return j;
}

Json Json::Object()
{
    Json j;
    j.kind_ = OBJ;
    return j;
}

Json &Json::Set(const std::string &key, Json v)
{
    for (auto &kv : items_) {
        if (kv.first == key) {
            kv.second = std::move(v);
            return *this;
        }
    }
    items_.emplace_back(key, std::move(v));
    return *this;
}

Json &Json::Push(Json v)
{
    items_.emplace_back(std::string(), std::move(v));
    return *this;
}

std::string Json::Dump() const
{
    if (kind_ == RAW) {
        return text_;
    }
    std::string out(1, kind_ == OBJ ? '{' : '[');
    std::vector<const std::pair<std::string, Json> *> order;
    for (const auto &kv : items_) {
        order.push_back(&kv);
    }
    if (kind_ == OBJ) {  /* nlohmann::json's std::map: keys in byte order */
        std::sort(order.begin(), order.end(),
                  [](const auto *a, const auto *b) { return a->first < b->first; });
    }
    for (size_t i = 0; i < order.size(); ++i) {
        if (i != 0) {
            out += ',';
        }
        if (kind_ == OBJ) {
            out += Str(order[i]->first).text_;
            out += ':';
        }
        out += order[i]->second.Dump();
    }
    out += kind_ == OBJ ? '}' : ']';
    return out;
}

}  // namespace atbsim
