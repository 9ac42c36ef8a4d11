#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>

static int max_priority = LOG_INFO;

void act_log_set_max_priority(int priority)
{
    max_priority = priority;
}

int act_log_get_max_priority(void)
{
    return max_priority;
}

void act_log(int priority, const char *fmt, ...)
{
    if (priority > max_priority)
        return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "<%d>%s\n", priority, line);
}
