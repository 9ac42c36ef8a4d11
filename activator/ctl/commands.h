/* activatorctl's commands. Each parses its own arguments (argv[0] is the
 * command name) and returns a process exit code (CTL_EXIT_*). */
#pragma once

#include "activator/ctl/client.h"

typedef struct ctl_command {
    const char *name;
    const char *usage;   /* arguments after the name */
    const char *summary; /* one line */
    const char *help;    /* more lines for --help, or NULL */
    int (*run)(const ctl_options *options, int argc, char **argv);
} ctl_command;

extern const ctl_command ctl_commands[];

const ctl_command *ctl_command_find(const char *name);
void ctl_command_usage(const ctl_command *command, FILE *out);
/* "activatorctl: wake: missing HOST" + a pointer to --help; returns 2. */
int ctl_usage_error(const ctl_command *command, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
