#include "activator/config/parse-size.h"

#include <errno.h>
#include <string.h>

#include "common/text.h"

static int bad_size(const char *text, act_error *err)
{
    char shown[ACT_TEXT_SHOW_MAX];
    return act_error_set(err, EINVAL,
                         "\"%s\" is not a size (write bytes, or a number with K, M, G or T such "
                         "as 512M or 1.5G, or infinity)",
                         act_text_show(text, shown, sizeof(shown)));
}

int act_parse_size(const char *text, uint64_t *out, act_error *err)
{
    if (strcmp(text, "infinity") == 0) {
        *out = ACT_SIZE_INFINITY;
        return 0;
    }
    const char *p = text;
    uint64_t whole = 0;
    size_t whole_digits = 0;
    for (; *p >= '0' && *p <= '9'; p++, whole_digits++) {
        if (whole > (UINT64_MAX - 9) / 10)
            goto too_big;
        whole = whole * 10 + (uint64_t)(*p - '0');
    }
    /* The fraction is kept as digits over a power of ten so "1.5G" is exact. */
    uint64_t frac = 0, frac_scale = 1;
    if (*p == '.') {
        p++;
        for (; *p >= '0' && *p <= '9'; p++) {
            if (frac_scale < 1000000000ULL) {
                frac = frac * 10 + (uint64_t)(*p - '0');
                frac_scale *= 10;
            }
        }
        if (frac_scale == 1)
            return bad_size(text, err);
    }
    if (whole_digits == 0)
        return bad_size(text, err);

    static const char units[] = "KMGTP";
    uint64_t factor = 1;
    if (*p) {
        const char *unit = strchr(units, *p);
        if (!unit)
            return bad_size(text, err);
        for (const char *u = units; u <= unit; u++)
            factor *= 1024;
        p++;
        if (*p == 'B' || *p == 'b') /* "512MB" means what its writer meant */
            p++;
    }
    if (*p)
        return bad_size(text, err);
    if (frac_scale > 1 && factor == 1)
        return bad_size(text, err); /* fractions of a byte */
    if (whole > UINT64_MAX / factor)
        goto too_big;
    /* frac < frac_scale, so the fraction adds less than one unit. */
    uint64_t fraction_bytes = (uint64_t)((unsigned __int128)frac * factor / frac_scale);
    if (whole * factor > UINT64_MAX - fraction_bytes)
        goto too_big;
    uint64_t value = whole * factor + fraction_bytes;
    if (value == 0) {
        char shown[ACT_TEXT_SHOW_MAX];
        return act_error_set(err, ERANGE,
                             "%s is 0 bytes, which would stop the app at once (give a real size, "
                             "or infinity for no limit)",
                             act_text_show(text, shown, sizeof(shown)));
    }
    *out = value;
    return 0;

too_big : {
    char shown[ACT_TEXT_SHOW_MAX];
    return act_error_set(err, ERANGE, "%s does not fit in 64 bits (use infinity for no limit)",
                         act_text_show(text, shown, sizeof(shown)));
}
}
