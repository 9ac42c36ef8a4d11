/* The "#!" line (wake/shebang.h). */
#include "activator/daemon/wake/shebang.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

int ad_shebang_parse(const char *text, size_t n, char out[AD_SHEBANG_MAX], act_error *err)
{
    assert(text && out);
    out[0] = '\0';
    if (n < 2 || text[0] != '#' || text[1] != '!')
        return 0;
    size_t i = 2;
    while (i < n && (text[i] == ' ' || text[i] == '\t'))
        i++;
    size_t start = i;
    while (i < n && text[i] != ' ' && text[i] != '\t' && text[i] != '\n' && text[i] != '\0')
        i++;
    if (i == start)
        return act_error_set(err, ENOEXEC,
                             "its \"#!\" line names no interpreter; write one, as in "
                             "#!/bin/sh");
    if (i == n && n >= AD_SHEBANG_MAX - 1)
        return act_error_set(err, ENAMETOOLONG,
                             "its \"#!\" line is longer than the kernel reads (%d bytes); "
                             "name a shorter interpreter path",
                             AD_SHEBANG_MAX - 1);
    size_t len = i - start;
    memcpy(out, text + start, len);
    out[len] = '\0';
    if (out[0] != '/')
        return act_error_set(err, ENOEXEC,
                             "its \"#!\" line names the interpreter \"%s\" by a relative path, "
                             "which the kernel would look up in the state directory; write an "
                             "absolute path",
                             out);
    return 1;
}
