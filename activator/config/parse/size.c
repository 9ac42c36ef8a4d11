#include "activator/config/parse/size.h"

#include <assert.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/text.h"

/* "TEXT" then why it is refused and what to write. */
static int refuse(const char *text, int errnum, const char *why, act_error *err)
{
    char shown[ACT_TEXT_SHOW_MAX];
    return act_error_set(err, errnum, "\"%s\" %s", act_text_show(text, shown, sizeof(shown)), why);
}

static int bad_size(const char *text, act_error *err)
{
    return refuse(text, EINVAL,
                  "is not a size (write bytes, or a number with K, M, G or T such as 512M or "
                  "1.5G, a share of the memory such as 50%, or infinity)",
                  err);
}

/* DIGITS[.DIGITS] at *p: the whole part, and the fraction as digits over a
 * power of ten so "1.5G" is exact. Returns false without digits before the
 * dot or after it. */
static bool read_decimal(const char **p, uint64_t *whole, uint64_t *frac, uint64_t *frac_scale)
{
    const char *at = *p;
    size_t digits = strspn(at, "0123456789");
    *whole = 0;
    *frac = 0;
    *frac_scale = 1;
    for (size_t i = 0; i < digits; i++) {
        if (*whole > (UINT64_MAX - 9) / 10)
            *whole = UINT64_MAX; /* too big whatever follows */
        else
            *whole = *whole * 10 + (uint64_t)(at[i] - '0');
    }
    at += digits;
    if (*at == '.') {
        size_t frac_digits = strspn(++at, "0123456789");
        if (frac_digits == 0)
            return false;
        for (size_t i = 0; i < frac_digits; i++) {
            if (*frac_scale < 1000000000ULL) {
                *frac = *frac * 10 + (uint64_t)(at[i] - '0');
                *frac_scale *= 10;
            }
        }
        at += frac_digits;
    }
    *p = at;
    return digits > 0;
}

/* "N%" of total, as systemd's MemoryMax= reads it: up to two decimals (a
 * permyriad), at most 100%. */
static int parse_share(const char *text, uint64_t total, uint64_t *out, act_error *err)
{
    const char *p = text;
    uint64_t whole, frac, frac_scale;
    if (!read_decimal(&p, &whole, &frac, &frac_scale) || frac_scale > 100 || strcmp(p, "%") != 0)
        return bad_size(text, err);
    uint64_t permyriad = whole > 100 ? UINT64_MAX : whole * 100 + frac * (100 / frac_scale);
    if (permyriad > 10000)
        return refuse(text, ERANGE,
                      "is more than all of the memory (use at most 100%, or infinity for no "
                      "limit)",
                      err);
    *out = (uint64_t)((unsigned __int128)total * permyriad / 10000);
    return 0;
}

static uint64_t physical_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
    return pages > 0 && page_size > 0 ? (uint64_t)pages * (uint64_t)page_size : 0;
}

/* NUMBER[UNIT[B]] in bytes. */
static int parse_bytes(const char *text, uint64_t *out, act_error *err)
{
    const char *p = text;
    uint64_t whole, frac, frac_scale;
    if (!read_decimal(&p, &whole, &frac, &frac_scale))
        return bad_size(text, err);
    static const char units[] = "KMGTPE";
    uint64_t factor = 1;
    const char *unit = *p ? strchr(units, *p) : NULL;
    if (unit) {
        for (const char *u = units; u <= unit; u++)
            factor *= 1024;
        p++;
    }
    if (*p == 'B' || (unit && *p == 'b')) /* "512MB" and "4096B" mean what their writer meant */
        p++;
    if (*p || (frac_scale > 1 && factor == 1)) /* junk, or fractions of a byte */
        return bad_size(text, err);
    /* frac < frac_scale, so the fraction adds less than one unit. */
    unsigned __int128 value =
        (unsigned __int128)whole * factor + (unsigned __int128)frac * factor / frac_scale;
    if (value >= UINT64_MAX) /* UINT64_MAX is infinity */
        return refuse(text, ERANGE, "does not fit in 64 bits (use infinity for no limit)", err);
    *out = (uint64_t)value;
    return 0;
}

int cfg_parse_size(const char *text, uint64_t *out, act_error *err)
{
    assert(text && out);
    if (strcmp(text, "infinity") == 0) {
        *out = CFG_SIZE_INFINITY;
        return 0;
    }
    uint64_t value = 0; /* gcc -O3 cannot see that both parsers set it on success */
    size_t len = strlen(text);
    int r = len && text[len - 1] == '%' ? parse_share(text, physical_memory(), &value, err)
                                        : parse_bytes(text, &value, err);
    if (r < 0)
        return r;
    if (value == 0)
        return refuse(text, ERANGE,
                      "is 0 bytes, which would stop the app at once (give a real size, or "
                      "infinity for no limit)",
                      err);
    *out = value;
    return 0;
}
