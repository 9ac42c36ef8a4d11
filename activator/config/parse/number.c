#include "activator/config/parse/number.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/text.h"

int cfg_parse_bool(const char *text, bool *out, act_error *err)
{
    /* systemd's parse_boolean: these, in any case. */
    static const char *const yes[] = {"yes", "true", "on", "1", "y", "t"};
    static const char *const no[] = {"no", "false", "off", "0", "n", "f"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(text, yes[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcasecmp(text, no[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    char shown[ACT_TEXT_SHOW_MAX];
    return act_error_set(err, EINVAL, "\"%s\" is not a boolean (write yes or no)",
                         act_text_show(text, shown, sizeof(shown)));
}

int cfg_parse_uint(const char *text, uint64_t min, uint64_t max, uint64_t *out, act_error *err)
{
    char shown[ACT_TEXT_SHOW_MAX];
    act_text_show(text, shown, sizeof(shown));
    if (text[0] == '\0' || strspn(text, "0123456789") != strlen(text))
        return act_error_set(err, EINVAL,
                             "\"%s\" is not a whole number (write digits only, %" PRIu64
                             " to %" PRIu64 ")",
                             shown, min, max);
    errno = 0;
    unsigned long long value = strtoull(text, NULL, 10);
    if (errno == ERANGE || value < min || value > max)
        return act_error_set(err, ERANGE, "%s is out of range (use %" PRIu64 " to %" PRIu64 ")",
                             shown, min, max);
    *out = value;
    return 0;
}

int cfg_parse_percent(const char *text, uint32_t min, uint32_t max, uint32_t *out, act_error *err)
{
    char shown[ACT_TEXT_SHOW_MAX];
    size_t len = strlen(text);
    if (len < 2 || text[len - 1] != '%' || strspn(text, "0123456789") != len - 1)
        return act_error_set(err, EINVAL,
                             "\"%s\" is not a whole percentage (write it like 50%% or 200%%; "
                             "100%% is one CPU)",
                             act_text_show(text, shown, sizeof(shown)));
    errno = 0;
    unsigned long long value = strtoull(text, NULL, 10);
    if (errno == ERANGE || value < min || value > max)
        return act_error_set(err, ERANGE, "%s is out of range (use %" PRIu32 "%% to %" PRIu32 "%%)",
                             act_text_show(text, shown, sizeof(shown)), min, max);
    *out = (uint32_t)value;
    return 0;
}

int cfg_parse_rate(const char *text, double max, double *out, act_error *err)
{
    char shown[ACT_TEXT_SHOW_MAX];
    act_text_show(text, shown, sizeof(shown));
    /* strtod alone would take "inf", "nan", hex floats and leading spaces;
     * a rate in a config file is plain decimal digits with one optional dot. */
    size_t digits = strspn(text, "0123456789.");
    const char *dot = strchr(text, '.');
    if (text[0] == '\0' || digits != strlen(text) || (dot && strchr(dot + 1, '.')) ||
        strcmp(text, ".") == 0)
        return act_error_set(err, EINVAL,
                             "\"%s\" is not a decimal number (write starts per second, like 10 "
                             "or 0.5)",
                             shown);
    double value = strtod(text, NULL);
    if (!(value > 0))
        return act_error_set(err, ERANGE,
                             "%s would never allow a start (use a positive rate, or remove the "
                             "line for no limit)",
                             shown);
    if (value > max)
        return act_error_set(err, ERANGE, "%s is above the largest rate %.0f (use a smaller one)",
                             shown, max);
    *out = value;
    return 0;
}
