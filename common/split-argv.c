#include "common/split-argv.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* The value of n hex (base 16) or octal (base 8) digits at p; false when
 * fewer are there. */
static bool read_digits(const char *p, size_t n, unsigned base, uint32_t *value)
{
    *value = 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        unsigned digit = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                         : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                         : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                                : 16;
        if (digit >= base)
            return false;
        *value = *value * base + digit;
    }
    return true;
}

/* Writes code point cp as UTF-8; returns the number of bytes. */
static size_t put_utf8(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* A numeric escape: \xHH, \NNN, \uHHHH or \UHHHHHHHH at p (past the
 * backslash). Returns the input length, or 0 when it is not a valid one. */
static size_t numeric_escape(const char *p, char *word, size_t *used)
{
    uint32_t value;
    if (p[0] == 'x' && read_digits(p + 1, 2, 16, &value) && value) {
        word[(*used)++] = (char)value;
        return 3;
    }
    if (p[0] >= '0' && p[0] <= '3' && read_digits(p, 3, 8, &value) && value) {
        word[(*used)++] = (char)value;
        return 3;
    }
    size_t digits = p[0] == 'u' ? 4 : p[0] == 'U' ? 8 : 0;
    if (digits && read_digits(p + 1, digits, 16, &value) && value && value <= 0x10ffff &&
        !(value >= 0xd800 && value <= 0xdfff)) {
        *used += put_utf8(value, word + *used);
        return digits + 1;
    }
    return 0;
}

/* The escape after the backslash at *p, appended to word (never longer than
 * its input, so the word buffer suffices). */
static int unescape(const char **p, char *word, size_t *used, act_error *err)
{
    static const char simple[] = "abfnrtv\\\"'s \t";
    static const char meaning[] = "\a\b\f\n\r\t\v\\\"'  \t";
    const char *at = *p + 1;
    if (*at == '\0')
        return act_error_set(err, EINVAL,
                             "the line ends in a backslash (remove it, or write \\\\ for a "
                             "literal backslash)");
    const char *found = strchr(simple, *at);
    if (found) {
        word[(*used)++] = meaning[found - simple];
        *p = at + 1;
        return 0;
    }
    size_t len = numeric_escape(at, word, used);
    if (len == 0)
        return act_error_set(err, EINVAL,
                             "\\%c is not an escape (write \\\\ for a backslash; the escapes are "
                             "\\n \\t \\s \\\" \\' \\\\ \\xHH \\NNN \\uHHHH and the like of C; "
                             "none makes a NUL)",
                             *at >= 0x20 && *at < 0x7f ? *at : '?');
    *p = at + len;
    return 0;
}

/* One word at *p, into word (with room for the whole text); *p ends past it. */
static int split_word(const char **p, char *word, size_t *used, act_error *err)
{
    char quote = 0;
    while (**p && (quote || !is_blank(**p))) {
        if (**p == '\\') {
            int r = unescape(p, word, used, err);
            if (r < 0)
                return r;
        } else if (quote ? **p == quote : (**p == '\'' || **p == '"')) {
            quote = quote ? 0 : **p;
            (*p)++;
        } else {
            word[(*used)++] = *(*p)++;
        }
    }
    if (quote == '\'')
        return act_error_set(err, EINVAL, "a single quote is not closed (add the closing ')");
    if (quote)
        return act_error_set(err, EINVAL, "a double quote is not closed (add the closing \")");
    return 0;
}

int act_split_argv(const char *text, char ***out, act_error *err)
{
    assert(text && out);
    /* No word is longer than the text, so one buffer of its length holds any
     * word being built, and there are at most len/2+1 words. */
    size_t len = strlen(text);
    _cleanup_free_ char *word = malloc(len + 1);
    _cleanup_(act_strv_freep) char **words = calloc(len / 2 + 2, sizeof(char *));
    if (!word || !words)
        return act_error_set(err, ENOMEM, "out of memory splitting a command line");
    size_t n_words = 0;
    for (const char *p = text + strspn(text, " \t"); *p; p += strspn(p, " \t")) {
        size_t used = 0;
        int r = split_word(&p, word, &used, err);
        if (r < 0)
            return r;
        words[n_words] = strndup(word, used);
        if (!words[n_words])
            return act_error_set(err, ENOMEM, "out of memory splitting a command line");
        n_words++;
    }
    /* Shrink to what was used: 10,000 hosts keep these arrays for life. */
    char **shrunk = realloc(words, (n_words + 1) * sizeof(char *));
    if (shrunk)
        words = shrunk;
    words[n_words] = NULL;
    *out = TAKE_PTR(words);
    return 0;
}
