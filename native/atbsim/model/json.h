// A small JSON reader: the HTTP front of `atbsim serve`, and a checkpoint's
// config.json and safetensors headers (--weights).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace atbsim_lm {

struct JsonValue {
    enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
    bool b = false;
    double num = 0;
    std::string str;
    std::vector<JsonValue> arr;
    std::map<std::string, JsonValue> obj;

    const JsonValue *get(const std::string &key) const;  // nullptr if absent or not an object
};

// Parses a whole document; false with a message naming the offset on error.
bool json_parse(const std::string &text, JsonValue *out, std::string *err);

}  // namespace atbsim_lm
