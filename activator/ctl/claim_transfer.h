/* activatorctl --store URL claim export | claim import FILE: every claim of
 * a store as JSON lines, and those lines written back, for an operator who
 * repairs a store by hand (README) or moves claims between stores. */
#pragma once

#include "activator/ctl/command.h"

/* Whether sub ("export", "import") is one of these sub-commands. */
bool ctl_claim_transfer_is(const char *sub);

/* Runs "claim export" or "claim import FILE"; argv[0] is the sub-command.
 * Returns a CTL_EXIT_* status. */
int ctl_claim_transfer(const ctl_command *self, const ctl_options *options, int argc, char **argv);
