#include "common/text.h"

#include <assert.h>
#include <string.h>

bool act_copy_string(char *dst, size_t size, const char *src)
{
    assert(dst);
    assert(src);
    if (size == 0)
        return false;
    size_t len = strnlen(src, size);
    bool fits = len < size;
    if (!fits)
        len = size - 1;
    memcpy(dst, src, len);
    dst[len] = '\0';
    return fits;
}
