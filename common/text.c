#include "common/text.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Past this many characters a shown value is cut short. */
#define SHOWN_CHARS 60
/* The longest escape of one byte: "\xNN". */
#define ESCAPE_LEN 4

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

static bool is_shown_as_is(unsigned char c)
{
    return c >= 0x20 && c < 0x7f;
}

/* Writes c, escaped when needed, at out (room for ESCAPE_LEN + 1 bytes);
 * returns how many bytes it wrote, not counting the NUL. */
static size_t escape_byte(unsigned char c, char *out)
{
    if (is_shown_as_is(c)) {
        out[0] = (char)c;
        out[1] = '\0';
        return 1;
    }
    return (size_t)snprintf(out, ESCAPE_LEN + 1, "\\x%02x", c);
}

const char *act_text_show(const char *text, char *out, size_t out_size)
{
    assert(text);
    return act_text_show_bytes(text, strlen(text), out, out_size);
}

const char *act_text_show_bytes(const void *data, size_t len, char *out, size_t out_size)
{
    assert(data || len == 0);
    assert(out);
    if (out_size == 0)
        return out;
    size_t used = 0;
    out[0] = '\0';
    const unsigned char *bytes = data;
    for (size_t shown = 0; shown < len; shown++) {
        if (shown >= SHOWN_CHARS || used + ESCAPE_LEN + sizeof("...") >= out_size) {
            snprintf(out + used, out_size - used, "...");
            return out;
        }
        used += escape_byte(bytes[shown], out + used);
    }
    return out;
}

char *act_text_escape(const char *text)
{
    assert(text);
    size_t len = strlen(text);
    char *out = malloc(len * ESCAPE_LEN + 1);
    if (!out)
        return NULL;
    size_t used = 0;
    out[0] = '\0';
    for (const unsigned char *p = (const unsigned char *)text; *p; p++)
        used += escape_byte(*p, out + used);
    return out;
}
