/* A small Prometheus text-format parser, for tests that check what the
 * metrics server renders: the registry's own tests and the daemon's. */
#include "tests/common/prometheus.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct family_seen {
    char name[128];
    char type[16];
} family_seen;

/* Returns true when text is valid exposition format; fills why otherwise.
 * Checks: HELP/TYPE lines, every sample belongs to a TYPE'd family (with the
 * _bucket/_sum/_count suffixes for histograms), label syntax and escapes, and
 * values that parse as floats. Finds the value of want (a full sample name
 * with labels) when given. */
bool parse_prometheus(const char *text, const char *want, double *found, char *why,
                      size_t why_size)
{
    family_seen families[64];
    size_t n_families = 0;
    bool have_found = false;
    const char *line = text;
    int lineno = 0;
    while (*line) {
        lineno++;
        const char *end = strchr(line, '\n');
        if (!end) {
            snprintf(why, why_size, "line %d: no final newline", lineno);
            return false;
        }
        size_t len = (size_t)(end - line);
        char buf[1024];
        if (len >= sizeof(buf)) {
            snprintf(why, why_size, "line %d: too long", lineno);
            return false;
        }
        memcpy(buf, line, len);
        buf[len] = '\0';
        line = end + 1;
        if (len == 0)
            continue;
        if (buf[0] == '#') {
            char name[128], type[16];
            if (strncmp(buf, "# HELP ", 7) == 0)
                continue;
            if (sscanf(buf, "# TYPE %127s %15s", name, type) != 2 ||
                (strcmp(type, "counter") && strcmp(type, "gauge") && strcmp(type, "histogram") &&
                 strcmp(type, "summary") && strcmp(type, "untyped"))) {
                snprintf(why, why_size, "line %d: bad comment: %.120s", lineno, buf);
                return false;
            }
            if (n_families == 64)
                return false;
            snprintf(families[n_families].name, sizeof(families[0].name), "%s", name);
            snprintf(families[n_families].type, sizeof(families[0].type), "%s", type);
            n_families++;
            continue;
        }
        /* name */
        char *p = buf;
        if (!(isalpha((unsigned char)*p) || *p == '_' || *p == ':')) {
            snprintf(why, why_size, "line %d: bad metric name: %.120s", lineno, buf);
            return false;
        }
        while (isalnum((unsigned char)*p) || *p == '_' || *p == ':')
            p++;
        char name[128];
        snprintf(name, sizeof(name), "%.*s", (int)(p - buf), buf);
        /* labels */
        if (*p == '{') {
            p++;
            while (*p != '}') {
                if (!(isalpha((unsigned char)*p) || *p == '_')) {
                    snprintf(why, why_size, "line %d: bad label name: %.120s", lineno, buf);
                    return false;
                }
                while (isalnum((unsigned char)*p) || *p == '_')
                    p++;
                if (p[0] != '=' || p[1] != '"') {
                    snprintf(why, why_size, "line %d: label without =\"value\": %.120s", lineno, buf);
                    return false;
                }
                p += 2;
                while (*p && *p != '"') {
                    if (*p == '\\') {
                        if (p[1] != '\\' && p[1] != '"' && p[1] != 'n') {
                            snprintf(why, why_size, "line %d: bad escape: %.120s", lineno, buf);
                            return false;
                        }
                        p++;
                    }
                    p++;
                }
                if (*p != '"') {
                    snprintf(why, why_size, "line %d: unterminated label value", lineno);
                    return false;
                }
                p++;
                if (*p == ',')
                    p++;
                else if (*p != '}') {
                    snprintf(why, why_size, "line %d: bad label separator: %.120s", lineno, buf);
                    return false;
                }
            }
            p++;
        }
        if (*p != ' ') {
            snprintf(why, why_size, "line %d: no space before the value: %.120s", lineno, buf);
            return false;
        }
        char sample[512];
        snprintf(sample, sizeof(sample), "%.*s", (int)(p - buf), buf);
        p++;
        char *value_end;
        double value;
        if (strcmp(p, "+Inf") == 0 || strcmp(p, "-Inf") == 0 || strcmp(p, "NaN") == 0) {
            value = strcmp(p, "NaN") == 0 ? NAN : (p[0] == '+' ? INFINITY : -INFINITY);
        } else {
            errno = 0;
            value = strtod(p, &value_end);
            if (errno || value_end == p || (*value_end && *value_end != ' ')) {
                snprintf(why, why_size, "line %d: value is not a number: %.120s", lineno, buf);
                return false;
            }
        }
        /* the family */
        bool known = false;
        for (size_t i = 0; i < n_families && !known; i++) {
            size_t flen = strlen(families[i].name);
            if (strcmp(name, families[i].name) == 0)
                known = strcmp(families[i].type, "histogram") != 0;
            else if (strcmp(families[i].type, "histogram") == 0 &&
                     strncmp(name, families[i].name, flen) == 0 &&
                     (!strcmp(name + flen, "_bucket") || !strcmp(name + flen, "_sum") ||
                      !strcmp(name + flen, "_count")))
                known = true;
        }
        if (!known) {
            snprintf(why, why_size, "line %d: sample %s has no TYPE line", lineno, name);
            return false;
        }
        if (want && strcmp(sample, want) == 0) {
            *found = value;
            have_found = true;
        }
    }
    if (want && !have_found) {
        snprintf(why, why_size, "no sample %s", want);
        return false;
    }
    return true;
}

