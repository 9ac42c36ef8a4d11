/* Scope-bound ownership for fds and memory.
 *
 * A variable declared with one of the _cleanup_*_ attributes releases what it
 * holds when it leaves scope. Handing ownership on is explicit: TAKE_FD and
 * TAKE_PTR return the value and leave the variable empty, so the cleanup at
 * scope exit does nothing. */
#pragma once

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))

static inline void act_freep(void *p)
{
    free(*(void **)p);
}

static inline void act_closep(int *fd)
{
    if (*fd >= 0) {
        /* close() may clobber errno; callers often read it after a failed call. */
        int saved = errno;
        close(*fd);
        errno = saved;
    }
}

static inline void act_fclosep(FILE **f)
{
    if (*f)
        fclose(*f);
}

#define _cleanup_free_ _cleanup_(act_freep)
#define _cleanup_close_ _cleanup_(act_closep)
#define _cleanup_fclose_ _cleanup_(act_fclosep)

#define TAKE_FD(fd)                                                                                \
    ({                                                                                             \
        int taken_fd_ = (fd);                                                                      \
        (fd) = -1;                                                                                 \
        taken_fd_;                                                                                 \
    })

#define TAKE_PTR(ptr)                                                                              \
    ({                                                                                             \
        __typeof__(ptr) taken_ptr_ = (ptr);                                                        \
        (ptr) = NULL;                                                                              \
        taken_ptr_;                                                                                \
    })

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
