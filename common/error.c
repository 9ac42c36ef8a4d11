#include "common/error.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int act_error_set(act_error *err, int errnum, const char *fmt, ...)
{
    assert(fmt);
    if (errnum <= 0)
        errnum = EIO; /* a failure always carries an errno, never 0 */
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof(err->message), fmt, ap);
        va_end(ap);
        err->errnum = errnum;
    }
    return -errnum;
}

int act_error_prefix(act_error *err, const char *fmt, ...)
{
    assert(fmt);
    if (!err)
        return -EIO;
    char prefix[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);

    /* Shift the message right and put the prefix in front; a message that
     * no longer fits loses its tail, never its start. */
    size_t cap = sizeof(err->message);
    size_t head = strnlen(prefix, sizeof(prefix)) + 2;
    if (head >= cap)
        head = cap - 1;
    size_t body = strnlen(err->message, cap - 1);
    if (head + body > cap - 1)
        body = cap - 1 - head;
    memmove(err->message + head, err->message, body);
    memcpy(err->message, prefix, head >= 2 ? head - 2 : head);
    if (head >= 2)
        memcpy(err->message + head - 2, ": ", 2);
    err->message[head + body] = '\0';
    if (err->errnum <= 0)
        err->errnum = EIO;
    return -err->errnum;
}

void act_error_clear(act_error *err)
{
    if (err) {
        err->errnum = 0;
        err->message[0] = '\0';
    }
}
