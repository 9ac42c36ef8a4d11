/* activatorctl's commands. Most send one control op, and take their
 * arguments, usage and summary from the op table (activator/control/ops.h);
 * the others (claim, watch, help) run code of their own. Each returns a
 * process exit code (CTL_EXIT_*). */
#pragma once

#include <stdio.h>

#include <json-c/json.h>

#include "activator/control/ops.h"
#include "activator/ctl/client.h"

typedef struct ctl_command ctl_command;

/* Prints a successful reply's result. */
typedef void (*ctl_render_fn)(json_object *result, const ctl_options *options);

struct ctl_command {
    const char *name;
    int op;                 /* the ctrl_op it sends, or -1 when run says what it does */
    const char *ops_prefix; /* sub-commands: the ops named <ops_prefix><sub-command> */
    const char *usage;      /* arguments after the name besides the op's own, or NULL */
    const char *summary;    /* one line; NULL: the op's summary */
    const char *help;       /* more lines for --help, or NULL */
    ctl_render_fn render;
    int timeout_sec;        /* how long to wait for the reply; 0: a quick request */
    /* NULL: send op with the arguments the op table gives it. argv[0] is
     * the command name. */
    int (*run)(const ctl_command *self, const ctl_options *options, int argc, char **argv);
};

extern const ctl_command ctl_commands[];

const ctl_command *ctl_command_find(const char *name);
/* The command's one-line summary. */
const char *ctl_command_summary(const ctl_command *command);
void ctl_command_usage(const ctl_command *command, FILE *out);
/* Runs a command with its arguments (argv[0] is its name). */
int ctl_command_run(const ctl_command *command, const ctl_options *options, int argc, char **argv);
/* "activatorctl: wake: missing HOST" + a pointer to --help; returns 2. */
int ctl_usage_error(const ctl_command *command, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
