#include "activator/config/parse-duration.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/text.h"

static const struct {
    const char *name;
    uint64_t usec;
} units[] = {
    {"us", 1},
    {"usec", 1},
    {"ms", 1000},
    {"msec", 1000},
    {"s", ACT_USEC_PER_SEC},
    {"sec", ACT_USEC_PER_SEC},
    {"second", ACT_USEC_PER_SEC},
    {"seconds", ACT_USEC_PER_SEC},
    {"m", 60 * ACT_USEC_PER_SEC},
    {"min", 60 * ACT_USEC_PER_SEC},
    {"minute", 60 * ACT_USEC_PER_SEC},
    {"minutes", 60 * ACT_USEC_PER_SEC},
    {"h", 3600 * ACT_USEC_PER_SEC},
    {"hr", 3600 * ACT_USEC_PER_SEC},
    {"hour", 3600 * ACT_USEC_PER_SEC},
    {"hours", 3600 * ACT_USEC_PER_SEC},
    {"d", 86400 * ACT_USEC_PER_SEC},
    {"day", 86400 * ACT_USEC_PER_SEC},
    {"days", 86400 * ACT_USEC_PER_SEC},
};

static int bad_duration(const char *text, act_error *err)
{
    char shown[ACT_TEXT_SHOW_MAX];
    return act_error_set(err, EINVAL,
                         "\"%s\" is not a time span (write seconds like 30, or with units like "
                         "500ms, 2min or 1min 30s)",
                         act_text_show(text, shown, sizeof(shown)));
}

int act_parse_duration(const char *text, uint64_t *usec, act_error *err)
{
    const char *p = text;
    uint64_t total = 0;
    size_t terms = 0;
    for (;;) {
        p += strspn(p, " \t");
        if (*p == '\0')
            break;
        uint64_t whole = 0, frac = 0, frac_scale = 1;
        size_t digits = 0;
        for (; *p >= '0' && *p <= '9'; p++, digits++) {
            if (whole > (UINT64_MAX - 9) / 10)
                goto too_long;
            whole = whole * 10 + (uint64_t)(*p - '0');
        }
        if (*p == '.') {
            p++;
            for (; *p >= '0' && *p <= '9'; p++, digits++) {
                if (frac_scale < 1000000000ULL) {
                    frac = frac * 10 + (uint64_t)(*p - '0');
                    frac_scale *= 10;
                }
            }
        }
        if (digits == 0)
            return bad_duration(text, err);
        size_t unit_len = strspn(p, "abcdefghijklmnopqrstuvwxyz");
        uint64_t factor = 0;
        if (unit_len == 0) {
            factor = ACT_USEC_PER_SEC;
        } else {
            for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
                if (strlen(units[i].name) == unit_len && strncmp(p, units[i].name, unit_len) == 0)
                    factor = units[i].usec;
            }
            if (factor == 0)
                return bad_duration(text, err);
            p += unit_len;
        }
        if (*p != '\0' && *p != ' ' && *p != '\t')
            return bad_duration(text, err);
        if (whole > UINT64_MAX / factor)
            goto too_long;
        uint64_t term = whole * factor + (uint64_t)((unsigned __int128)frac * factor / frac_scale);
        if (total > UINT64_MAX - term)
            goto too_long;
        total += term;
        terms++;
    }
    if (terms == 0)
        return bad_duration(text, err);
    *usec = total;
    return 0;

too_long : {
    char shown[ACT_TEXT_SHOW_MAX];
    return act_error_set(err, ERANGE, "%s is too long a time span (use a shorter one)",
                         act_text_show(text, shown, sizeof(shown)));
}
}

void act_format_duration(uint64_t usec, char *out, size_t out_size)
{
    static const struct {
        const char *suffix;
        uint64_t usec;
    } steps[] = {
        {"d", 86400 * ACT_USEC_PER_SEC},
        {"h", 3600 * ACT_USEC_PER_SEC},
        {"min", 60 * ACT_USEC_PER_SEC},
        {"s", ACT_USEC_PER_SEC},
        {"ms", 1000},
        {"us", 1},
    };
    if (usec == 0) {
        snprintf(out, out_size, "0");
        return;
    }
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]) && usec && used < out_size; i++) {
        uint64_t count = usec / steps[i].usec;
        if (count == 0)
            continue;
        usec -= count * steps[i].usec;
        int w = snprintf(out + used, out_size - used, "%s%" PRIu64 "%s", used ? " " : "", count,
                         steps[i].suffix);
        if (w > 0)
            used += (size_t)w;
    }
}

int act_parse_duration_range(const char *text, uint64_t min_usec, uint64_t max_usec, uint64_t *usec,
                             act_error *err)
{
    uint64_t value;
    int r = act_parse_duration(text, &value, err);
    if (r < 0)
        return r;
    if (value < min_usec || value > max_usec) {
        char shown[ACT_TEXT_SHOW_MAX], lo[64], hi[64];
        act_format_duration(min_usec, lo, sizeof(lo));
        act_format_duration(max_usec, hi, sizeof(hi));
        return act_error_set(err, ERANGE, "%s is out of range (use %s to %s)",
                             act_text_show(text, shown, sizeof(shown)), lo, hi);
    }
    *usec = value;
    return 0;
}
