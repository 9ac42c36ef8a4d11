/* Strings in fixed-size record fields, and text from outside shown safely in
 * messages. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Copies src into dst of size bytes, always NUL-terminated, cutting it short
 * when it does not fit (a sentence in a 256-byte field: the start is what a
 * reader needs). Returns true when all of src fit. */
bool act_copy_string(char *dst, size_t size, const char *src);

/* Text from outside (a configuration value, a file name, a URL) shown in a
 * message has every byte that is not printable ASCII written as \xNN, so the
 * message stays one line that a terminal shows as it is, whatever the text
 * held. A backslash is left as it is: the escapes are for reading, not for
 * parsing back. */

/* A buffer large enough for act_text_show's longest result. */
#define ACT_TEXT_SHOW_MAX 256

/* Copies text into out escaped, anything past about 60 characters replaced
 * by "...", so a long value does not bury the message. Returns out. */
const char *act_text_show(const char *text, char *out, size_t out_size);
/* The same for len bytes that may hold a NUL (shown as \x00), such as a key
 * from a store that allows any byte in it. */
const char *act_text_show_bytes(const void *data, size_t len, char *out, size_t out_size);

/* The whole of text escaped, in a malloc'd string; NULL when out of memory. */
char *act_text_escape(const char *text);
