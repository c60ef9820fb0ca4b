#include "json.h"

#include <cstdio>
#include <cstdlib>

namespace atbsim_lm {

const JsonValue *JsonValue::get(const std::string &key) const {
    if (kind != Object) return nullptr;
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &it->second;
}

namespace {

constexpr int kMaxDepth = 64;
// No document atbsim reads (a request, a config, a checkpoint's header or index) holds
// a million values; a crafted one of tens of MB would take gigabytes as JsonValues.
constexpr size_t kMaxValues = 1000000;

struct Parser {
    explicit Parser(const std::string &text) : s(text) {}
    const std::string &s;
    size_t i = 0;
    size_t values = 0;
    std::string err;

    bool fail(const std::string &what) {
        if (err.empty()) err = what + " at offset " + std::to_string(i);
        return false;
    }
    void ws() {
        while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    }
    bool lit(const char *word) {
        size_t n = std::char_traits<char>::length(word);
        if (s.compare(i, n, word) != 0) return fail("invalid literal");
        i += n;
        return true;
    }
    static void utf8(unsigned cp, std::string *out) {
        if (cp < 0x80) {
            *out += static_cast<char>(cp);
        } else if (cp < 0x800) {
            *out += static_cast<char>(0xc0 | (cp >> 6));
            *out += static_cast<char>(0x80 | (cp & 0x3f));
        } else if (cp < 0x10000) {
            *out += static_cast<char>(0xe0 | (cp >> 12));
            *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
            *out += static_cast<char>(0x80 | (cp & 0x3f));
        } else {
            *out += static_cast<char>(0xf0 | (cp >> 18));
            *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
            *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
            *out += static_cast<char>(0x80 | (cp & 0x3f));
        }
    }
    bool hex4(unsigned *cp) {
        if (i + 4 > s.size()) return fail("truncated \\u escape");
        char buf[5] = {s[i], s[i + 1], s[i + 2], s[i + 3], 0};
        char *end = nullptr;
        *cp = static_cast<unsigned>(std::strtoul(buf, &end, 16));
        if (*end) return fail("bad \\u escape");
        i += 4;
        return true;
    }
    bool string(std::string *out) {
        i++;  // opening quote
        while (i < s.size() && s[i] != '"') {
            char c = s[i++];
            if (static_cast<unsigned char>(c) < 0x20) return fail("control character in string");
            if (c != '\\') {
                *out += c;
                continue;
            }
            if (i >= s.size()) break;
            char e = s[i++];
            const char *plain = "\"\\/bfnrt", *mapped = "\"\\/\b\f\n\r\t";
            const char *p = std::char_traits<char>::find(plain, 8, e);
            if (p) {
                *out += mapped[p - plain];
            } else if (e == 'u') {
                unsigned cp = 0;
                if (!hex4(&cp)) return false;
                if (cp >= 0xd800 && cp < 0xdc00 && s.compare(i, 2, "\\u") == 0) {
                    i += 2;
                    unsigned lo = 0;
                    if (!hex4(&lo)) return false;
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                }
                utf8(cp, out);
            } else {
                return fail("bad escape");
            }
        }
        if (i >= s.size()) return fail("unterminated string");
        i++;
        return true;
    }
    bool value(JsonValue *v, int depth) {
        if (depth > kMaxDepth) return fail("nesting too deep");
        if (++values > kMaxValues) return fail("more than " + std::to_string(kMaxValues) + " values");
        ws();
        if (i >= s.size()) return fail("unexpected end");
        char c = s[i];
        if (c == '{') {
            v->kind = JsonValue::Object;
            i++;
            ws();
            if (i < s.size() && s[i] == '}') return ++i, true;
            for (;;) {
                ws();
                if (i >= s.size() || s[i] != '"') return fail("expected a key string");
                std::string key;
                if (!string(&key)) return false;
                ws();
                if (i >= s.size() || s[i] != ':') return fail("expected ':'");
                i++;
                if (!value(&v->obj[key], depth + 1)) return false;
                ws();
                if (i < s.size() && s[i] == ',') { i++; continue; }
                if (i < s.size() && s[i] == '}') return ++i, true;
                return fail("expected ',' or '}'");
            }
        }
        if (c == '[') {
            v->kind = JsonValue::Array;
            i++;
            ws();
            if (i < s.size() && s[i] == ']') return ++i, true;
            for (;;) {
                v->arr.emplace_back();
                if (!value(&v->arr.back(), depth + 1)) return false;
                ws();
                if (i < s.size() && s[i] == ',') { i++; continue; }
                if (i < s.size() && s[i] == ']') return ++i, true;
                return fail("expected ',' or ']'");
            }
        }
        if (c == '"') {
            v->kind = JsonValue::String;
            return string(&v->str);
        }
        if (c == 't' || c == 'f') {
            v->kind = JsonValue::Bool;
            v->b = c == 't';
            return lit(v->b ? "true" : "false");
        }
        if (c == 'n') return lit("null");
        const char *start = s.c_str() + i;
        char *end = nullptr;
        v->num = std::strtod(start, &end);
        if (end == start) return fail("unexpected character");
        v->kind = JsonValue::Number;
        i += static_cast<size_t>(end - start);
        return true;
    }
};

}  // namespace

bool json_parse(const std::string &text, JsonValue *out, std::string *err) {
    Parser p(text);
    *out = JsonValue();
    bool ok = p.value(out, 0);
    if (ok) {
        p.ws();
        if (p.i != text.size()) ok = p.fail("trailing characters");
    }
    if (!ok) *err = p.err;
    return ok;
}

}  // namespace atbsim_lm
