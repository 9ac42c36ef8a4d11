/* What one activatorctl command is (commands.c has the table of them), and
 * the one way a command refuses its command line. */
#pragma once

#include <json-c/json.h>

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

/* "activatorctl: wake: missing HOST" + a pointer to --help; returns 2. */
int ctl_usage_error(const ctl_command *command, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
