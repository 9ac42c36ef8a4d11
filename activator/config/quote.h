/* Shows a value from a configuration file inside an error message. */
#pragma once

#include <stddef.h>

/* Copies text into out with control and non-ASCII bytes escaped as \xNN and
 * anything past about 60 characters replaced by "...", so an error line stays
 * one readable line whatever the file held. Returns out. */
const char *act_config_quote(const char *text, char *out, size_t out_size);

/* A buffer large enough for act_config_quote's longest result. */
#define ACT_CONFIG_QUOTE_MAX 256
