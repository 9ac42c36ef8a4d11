/* An op command's command line, read through the op table
 * (activator/control/ops.h), so a field added there is an argument here at
 * once: the op's required name and path fields are positional arguments in
 * table order, an optional name field is an optional last one, a flag field
 * is an option (--no-wait for "no_wait"), and a choice field an option with
 * a value (--mode stop-first). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <getopt.h>
#include <json-c/json.h>

#include "activator/control/ops.h"
#include "activator/ctl/command.h"

/* A command's own options besides its op's fields, such as status --names:
 * on_option returns 0 when it took opt. */
typedef struct ctl_extra_options {
    const struct option *options; /* ends with a zeroed entry */
    int (*on_option)(int opt);
} ctl_extra_options;

/* "HOST VERSION [--mode overlap|stop-first] [--no-wait]" for swap. */
void ctl_op_usage(const ctrl_op_spec *spec, char *out, size_t size);

/* The arguments a command takes, as its usage line shows them: its op's,
 * then its own; or each sub-command's ("show HOST | assign HOST BOX | ..."). */
void ctl_command_arguments(const ctl_command *command, char *out, size_t size);

/* The sub-command of command that sends spec ("show" for claim.show), or
 * NULL when spec is not one of its ops. */
const char *ctl_sub_command(const ctl_command *command, const ctrl_op_spec *spec);

/* "assign HOST BOX": the sub-command of command that sends spec, with its
 * arguments; false when spec is not one of command's ops. */
bool ctl_sub_command_usage(const ctl_command *command, const ctrl_op_spec *spec, char *out,
                           size_t size);

/* 0 when name is a valid name of kind what ("host"), else a usage error
 * (printed) and its exit code. */
int ctl_check_name(const ctl_command *command, const char *what, const char *name);

/* Parses a command line (argv[0] is the command) of op spec into request.
 * Returns 0, -1 for --help, or a usage exit code after printing why. extra
 * may be NULL. */
int ctl_op_parse(const ctl_command *command, const ctrl_op_spec *spec, int argc, char **argv,
                 const ctl_extra_options *extra, json_object *request);
