/* UTF-8 validation (utf8.h). */
#include "utf8.h"

size_t utf8_len(const unsigned char *p, const unsigned char *end)
{
    unsigned c = p[0];
    size_t len;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c < 0xc2 || c > 0xf4)
        return 0;
    if (c <= 0xdf) {
        len = 2;
        min = 0x80;
    } else if (c <= 0xef) {
        len = 3;
        min = 0x800;
    } else {
        len = 4;
        min = 0x10000;
    }
    if ((size_t)(end - p) < len)
        return 0;
    unsigned cp = c & (0x7f >> len);
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    return cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) ? 0 : len;
}
