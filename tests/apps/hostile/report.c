/* The attempt lines of act-hostile (report.h): a fixed buffer, because the
 * app must keep reporting while a fork bomb it started makes every
 * allocation a risk. */
#include "report.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define REPORT_MAX (256 * 1024)

static char text[REPORT_MAX];
static size_t length;

static void append(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void append(const char *fmt, ...)
{
    if (length >= REPORT_MAX - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text + length, REPORT_MAX - length, fmt, ap);
    va_end(ap);
    if (n > 0)
        length = length + (size_t)n < REPORT_MAX ? length + (size_t)n : REPORT_MAX - 1;
}

/* A detail is free text on the end of a line; a newline in it would start a
 * line the test would misread. */
static void clean(char *out, size_t size, const char *detail)
{
    snprintf(out, size, "%s", detail && *detail ? detail : "-");
    for (char *c = out; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
}

const char *report_errno_name(int error)
{
    if (error == 0)
        return "-";
    const char *name = strerrorname_np(error);
    return name ? name : "E?";
}

void report_attempt(const char *name, bool succeeded, int error, const char *detail)
{
    char cleaned[512];
    clean(cleaned, sizeof(cleaned), detail);
    append("attempt %s %s %s %s\n", name, succeeded ? "succeeded" : "failed",
           report_errno_name(succeeded ? 0 : error), cleaned);
}

void report_untried(const char *name, const char *detail)
{
    char cleaned[512];
    clean(cleaned, sizeof(cleaned), detail);
    append("untried %s - %s\n", name, cleaned);
}

void report_control(const char *name, bool ok, int error)
{
    append("control %s %s %s\n", name, ok ? "ok" : "FAILED", report_errno_name(ok ? 0 : error));
}

void report_note(const char *name, const char *fmt, ...)
{
    char body[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    char cleaned[512];
    clean(cleaned, sizeof(cleaned), body);
    append("note %s %s\n", name, cleaned);
}

void report_line(const char *line)
{
    append("%s%s", line, line[0] && line[strlen(line) - 1] == '\n' ? "" : "\n");
}

const char *report_text(void)
{
    return text;
}

size_t report_length(void)
{
    return length;
}
