/* What the hostile app is told to attack, found from outside (as root, in
 * the daemon's view): the other host's state, claim and notify socket, every
 * release and manifest of both hosts, the daemon's sockets, and the other
 * host's and the daemon's cgroups. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#include "hostile_check.h"

/* Puts a world-readable file of the other host's own in its state directory
 * (only the directory and the namespace may keep it from the hostile app),
 * and writes the /attack request path into out. Returns 0 or a negative
 * errno with why. */
int targets_build(const hostile_setup *setup, pid_t other_pid, char *out, size_t size, char *why,
                  size_t why_size);

/* pid's parent as /proc says (the daemon, for a generation's main process),
 * or 0. */
pid_t targets_parent_of(pid_t pid);
