#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activator/config/config-internal.h"
#include "activator/config/config.h"
#include "common/cleanup.h"
#include "common/text.h"

void cfg_errors_free(cfg_errors *errors)
{
    for (size_t i = 0; i < errors->n; i++) {
        free(errors->items[i].file);
        free(errors->items[i].key);
        free(errors->items[i].text);
    }
    free(errors->items);
    *errors = (cfg_errors){0};
}

size_t cfg_errors_print(const cfg_errors *errors, FILE *out)
{
    for (size_t i = 0; i < errors->n; i++)
        fprintf(out, "%s\n", errors->items[i].text);
    return errors->n;
}

size_t cfg_errors_count_file(const cfg_errors *errors, const char *file)
{
    size_t count = 0;
    for (size_t i = 0; i < errors->n; i++)
        if (strcmp(errors->items[i].file, file) == 0)
            count++;
    return count;
}

void cfg_errors_add(cfg_errors *errors, const char *file, unsigned line, const char *key,
                    const char *fmt, ...)
{
    char what[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);

    if (errors->n == errors->cap) {
        size_t cap = errors->cap ? errors->cap * 2 : 8;
        cfg_error *grown = realloc(errors->items, cap * sizeof(*grown));
        if (!grown)
            abort(); /* a few bytes for an error report: nothing sensible is left to do */
        errors->items = grown;
        errors->cap = cap;
    }
    cfg_error *e = &errors->items[errors->n];
    *e = (cfg_error){.line = line};
    e->file = strdup(file);
    e->key = key ? act_text_escape(key) : NULL;
    char where[64] = "";
    if (line)
        snprintf(where, sizeof(where), ":%u", line);
    /* File names, keys, section names and values come from outside and may
     * hold any byte (a binary file in the hosts directory): the line that
     * reaches a terminal or the journal has them escaped, whichever parser
     * wrote the message. */
    _cleanup_free_ char *raw = NULL;
    int r = key ? asprintf(&raw, "%s%s: %s: %s", file, where, key, what)
                : asprintf(&raw, "%s%s: %s", file, where, what);
    if (r < 0 || !(e->text = act_text_escape(raw)) || !e->file || (key && !e->key))
        abort();
    errors->n++;
}
