#include "activator/config/quote.h"

#include <stdio.h>

const char *act_config_quote(const char *text, char *out, size_t out_size)
{
    size_t used = 0, shown = 0;
    if (out_size == 0)
        return out;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++, shown++) {
        if (shown >= 60 || used + 8 >= out_size) {
            snprintf(out + used, out_size - used, "...");
            return out;
        }
        if (*p >= 0x20 && *p < 0x7f)
            out[used++] = (char)*p;
        else
            used += (size_t)snprintf(out + used, out_size - used, "\\x%02x", *p);
    }
    out[used] = '\0';
    return out;
}
