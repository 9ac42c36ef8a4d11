#include "activator/ctl/command.h"

#include <stdarg.h>
#include <stdio.h>

int ctl_usage_error(const ctl_command *command, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "activatorctl: %s: ", command->name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'activatorctl %s --help'.\n", command->name);
    return CTL_EXIT_USAGE;
}
