/* AmbientCapabilities= lines, in systemd's syntax: capability names as in
 * capabilities(7) ("CAP_NET_BIND_SERVICE", any case), separated by spaces;
 * a leading ~ means every capability but those; lines add up and an empty
 * one resets. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* Adds the line's capabilities (1 << CAP_*) to *mask, or resets it for an
 * empty line; on failure *mask is unchanged. */
int cfg_parse_capabilities(const char *text, uint64_t *mask, act_error *err);

/* "CAP_NET_BIND_SERVICE CAP_KILL" for mask, for messages and status; the
 * names of the bits this build knows. */
void cfg_format_capabilities(uint64_t mask, char *out, size_t size);
