#include "activator/config/parse/duration.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/text.h"

#define USEC_PER_MIN (60 * CFG_USEC_PER_SEC)
#define USEC_PER_HOUR (3600 * CFG_USEC_PER_SEC)
#define USEC_PER_DAY (86400 * CFG_USEC_PER_SEC)
/* systemd's month and year: a twelfth of, and, 365.25 days. */
#define USEC_PER_YEAR (31557600 * CFG_USEC_PER_SEC)
#define USEC_PER_MONTH (USEC_PER_YEAR / 12)

/* systemd.time(7)'s units. They are case-sensitive: M is a month, m a
 * minute. */
static const struct {
    const char *name;
    uint64_t usec;
} units[] = {
    {"us", 1},
    {"usec", 1},
    {"\xce\xbcs", 1}, /* μs, with the Greek mu */
    {"\xc2\xb5s", 1}, /* µs, with the micro sign */
    {"ms", 1000},
    {"msec", 1000},
    {"s", CFG_USEC_PER_SEC},
    {"sec", CFG_USEC_PER_SEC},
    {"second", CFG_USEC_PER_SEC},
    {"seconds", CFG_USEC_PER_SEC},
    {"m", USEC_PER_MIN},
    {"min", USEC_PER_MIN},
    {"minute", USEC_PER_MIN},
    {"minutes", USEC_PER_MIN},
    {"h", USEC_PER_HOUR},
    {"hr", USEC_PER_HOUR},
    {"hour", USEC_PER_HOUR},
    {"hours", USEC_PER_HOUR},
    {"d", USEC_PER_DAY},
    {"day", USEC_PER_DAY},
    {"days", USEC_PER_DAY},
    {"w", 7 * USEC_PER_DAY},
    {"week", 7 * USEC_PER_DAY},
    {"weeks", 7 * USEC_PER_DAY},
    {"M", USEC_PER_MONTH},
    {"month", USEC_PER_MONTH},
    {"months", USEC_PER_MONTH},
    {"y", USEC_PER_YEAR},
    {"year", USEC_PER_YEAR},
    {"years", USEC_PER_YEAR},
};

static int bad_duration(const char *text, act_error *err)
{
    char shown[ACT_TEXT_SHOW_MAX];
    return act_error_set(err, EINVAL,
                         "\"%s\" is not a time span (write seconds like 30, or with units like "
                         "500ms, 2min or 1min 30s)",
                         act_text_show(text, shown, sizeof(shown)));
}

static int too_long(const char *text, act_error *err)
{
    char shown[ACT_TEXT_SHOW_MAX];
    return act_error_set(err, ERANGE, "%s is too long a time span (use a shorter one)",
                         act_text_show(text, shown, sizeof(shown)));
}

/* The factor of the unit of len bytes at p; 0 when there is no such unit. */
static uint64_t unit_factor(const char *p, size_t len)
{
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (strlen(units[i].name) == len && strncmp(p, units[i].name, len) == 0)
            return units[i].usec;
    return 0;
}

/* A unit's letters: ASCII letters, and the bytes of μ and µ. */
static size_t unit_length(const char *p)
{
    size_t len = 0;
    while ((p[len] >= 'a' && p[len] <= 'z') || (p[len] >= 'A' && p[len] <= 'Z') ||
           (unsigned char)p[len] >= 0x80)
        len++;
    return len;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* One NUMBER[.FRACTION] [UNIT] term at *p, added to *total. */
static int parse_term(const char **p, const char *text, uint64_t *total, act_error *err)
{
    const char *at = *p;
    uint64_t whole = 0, frac = 0, frac_scale = 1;
    size_t digits = 0;
    for (; *at >= '0' && *at <= '9'; at++, digits++) {
        if (whole > (UINT64_MAX - 9) / 10)
            return too_long(text, err);
        whole = whole * 10 + (uint64_t)(*at - '0');
    }
    if (*at == '.') {
        for (at++; *at >= '0' && *at <= '9'; at++, digits++) {
            if (frac_scale < 1000000000ULL) {
                frac = frac * 10 + (uint64_t)(*at - '0');
                frac_scale *= 10;
            }
        }
    }
    if (digits == 0)
        return bad_duration(text, err);
    /* Blanks may stand between a number and its unit ("5 min"). */
    const char *unit = at + strspn(at, " \t");
    size_t unit_len = unit_length(unit);
    uint64_t factor = unit_len ? unit_factor(unit, unit_len) : CFG_USEC_PER_SEC;
    if (unit_len)
        at = unit + unit_len;
    /* After a unit the next term may follow at once ("1min30s"); after a
     * bare number only a blank or the end may. */
    if (factor == 0 || (*at && !is_blank(*at) && !(unit_len && *at >= '0' && *at <= '9')))
        return bad_duration(text, err);
    unsigned __int128 term =
        (unsigned __int128)whole * factor + (unsigned __int128)frac * factor / frac_scale;
    if (term >= UINT64_MAX - *total) /* UINT64_MAX is infinity */
        return too_long(text, err);
    *total += (uint64_t)term;
    *p = at;
    return 0;
}

int cfg_parse_duration(const char *text, uint64_t *usec, act_error *err)
{
    assert(text && usec);
    const char *p = text + strspn(text, " \t");
    if (strncmp(p, "infinity", 8) == 0 && p[8 + strspn(p + 8, " \t")] == '\0') {
        *usec = CFG_USEC_INFINITY;
        return 0;
    }
    uint64_t total = 0;
    size_t terms = 0;
    for (; *p; p += strspn(p, " \t"), terms++) {
        int r = parse_term(&p, text, &total, err);
        if (r < 0)
            return r;
    }
    if (terms == 0)
        return bad_duration(text, err);
    *usec = total;
    return 0;
}

void cfg_format_duration(uint64_t usec, char *out, size_t out_size)
{
    static const struct {
        const char *suffix;
        uint64_t usec;
    } steps[] = {
        {"d", 86400 * CFG_USEC_PER_SEC},
        {"h", 3600 * CFG_USEC_PER_SEC},
        {"min", 60 * CFG_USEC_PER_SEC},
        {"s", CFG_USEC_PER_SEC},
        {"ms", 1000},
        {"us", 1},
    };
    if (usec == 0 || usec == CFG_USEC_INFINITY) {
        snprintf(out, out_size, "%s", usec ? "infinity" : "0");
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

int cfg_parse_duration_range(const char *text, uint64_t min_usec, uint64_t max_usec, uint64_t *usec,
                             act_error *err)
{
    uint64_t value;
    int r = cfg_parse_duration(text, &value, err);
    if (r < 0)
        return r;
    if (value < min_usec || value > max_usec) {
        char shown[ACT_TEXT_SHOW_MAX], lo[64], hi[64];
        cfg_format_duration(min_usec, lo, sizeof(lo));
        cfg_format_duration(max_usec, hi, sizeof(hi));
        return act_error_set(
            err, ERANGE, "%s is %s (use %s to %s)", act_text_show(text, shown, sizeof(shown)),
            value == CFG_USEC_INFINITY ? "not allowed here" : "out of range", lo, hi);
    }
    *usec = value;
    return 0;
}
