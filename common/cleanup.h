/* Scope-bound ownership for fds and memory.
 *
 * A variable declared with one of the _cleanup_*_ attributes releases what it
 * holds when it leaves scope. Handing ownership on is explicit: TAKE_FD and
 * TAKE_PTR return the value and leave the variable empty, so the cleanup at
 * scope exit does nothing.
 *
 * Each type's pointer cleanup lives in the header of the library that owns
 * the type (cg_leaf_freep in cgroup/cgroup.h, claims_store_freep in
 * claims/claims.h, ...); json-c's are in common/cleanup_json.h. sd-event's
 * come with libsystemd's own headers: _cleanup_(sd_event_unrefp),
 * _cleanup_(sd_event_source_unrefp) and _cleanup_(sd_event_source_disable_unrefp)
 * need nothing from here. */
#pragma once

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))

/* Defines funcp(type *p), which calls func(*p) unless *p is NULL, for use as
 * _cleanup_(funcp) on a variable of pointer type `type`. The NULL check lets
 * a variable start empty, or be emptied by TAKE_PTR, whatever func thinks of
 * NULL. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)                                                    \
    static inline void func##p(type *p)                                                            \
    {                                                                                              \
        if (*p)                                                                                    \
            func(*p);                                                                              \
    }

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

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir)

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

/* For a struct whose cleanup clears it (_cleanup_(rel_manifest_clear) and
 * the like): returns its value and leaves it zeroed. */
#define TAKE_STRUCT(s)                                                                             \
    ({                                                                                             \
        __typeof__(s) taken_struct_ = (s);                                                         \
        (s) = (__typeof__(s)){0};                                                                  \
        taken_struct_;                                                                             \
    })

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
