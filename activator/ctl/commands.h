/* activatorctl's commands. Most send one control op, and take their
 * arguments, usage and summary from the op table (activator/control/ops.h);
 * the others (claim, watch, help) run code of their own. Each returns a
 * process exit code (CTL_EXIT_*). */
#pragma once

#include <stdio.h>

#include <json-c/json.h>

#include "activator/control/ops.h"
#include "activator/ctl/client.h"
#include "activator/ctl/command.h"

extern const ctl_command ctl_commands[];

const ctl_command *ctl_command_find(const char *name);
/* The command's one-line summary. */
const char *ctl_command_summary(const ctl_command *command);
void ctl_command_usage(const ctl_command *command, FILE *out);
/* Runs a command with its arguments (argv[0] is its name). */
int ctl_command_run(const ctl_command *command, const ctl_options *options, int argc, char **argv);
/* The usage of activatorctl itself: its options and every command's
 * summary. */
void ctl_print_main_usage(FILE *out);
