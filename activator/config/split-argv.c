#include "activator/config/split-argv.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"

int act_split_argv(const char *text, char ***out, act_error *err)
{
    /* No word is longer than the text, so one buffer of its length holds any
     * word being built, and there are at most len/2+1 words. */
    size_t len = strlen(text);
    _cleanup_free_ char *word = malloc(len + 1);
    _cleanup_(act_strv_freep) char **words = calloc(len / 2 + 2, sizeof(char *));
    if (!word || !words)
        return act_error_set(err, ENOMEM, "out of memory splitting a command line");
    size_t n_words = 0;

    const char *p = text;
    for (;;) {
        p += strspn(p, " \t");
        if (*p == '\0')
            break;
        size_t used = 0;
        while (*p && *p != ' ' && *p != '\t') {
            if (*p == '\'') {
                const char *close = strchr(p + 1, '\'');
                if (!close)
                    return act_error_set(err, EINVAL,
                                         "a single quote is not closed (add the closing ')");
                memcpy(word + used, p + 1, (size_t)(close - p - 1));
                used += (size_t)(close - p - 1);
                p = close + 1;
            } else if (*p == '"') {
                p++;
                while (*p && *p != '"') {
                    if (*p == '\\' && (p[1] == '"' || p[1] == '\\'))
                        p++;
                    word[used++] = *p++;
                }
                if (*p != '"')
                    return act_error_set(err, EINVAL,
                                         "a double quote is not closed (add the closing \")");
                p++;
            } else if (*p == '\\') {
                if (p[1] == '\0')
                    return act_error_set(err, EINVAL,
                                         "the line ends in a backslash (remove it, or write \\\\ "
                                         "for a literal backslash)");
                word[used++] = p[1];
                p += 2;
            } else {
                word[used++] = *p++;
            }
        }
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
