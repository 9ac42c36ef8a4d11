/* The fd window: low fd numbers held by placeholders, so that a child which
 * starts out sharing our fd table (CLONE_FILES) can unshare it copying only
 * the numbers up to the window (close_range with CLOSE_RANGE_UNSHARE copies
 * just the fds below its first argument). Without it, every spawn copies the
 * whole table at the clone and closes it again at the exec, a cost per open
 * fd: about 1.2 ms per spawn in a daemon holding 10,000 listening sockets on
 * the machine this was written on. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup/spawn_internal.h"
#include "common/cleanup.h"

static struct {
    pthread_mutex_t lock;
    int placeholder; /* /dev/null, whose duplicates hold the slots */
    int *slots;
    size_t n_slots;
    int highest;
} window = {.lock = PTHREAD_MUTEX_INITIALIZER, .placeholder = -1, .highest = -1};

/* Fills slots with n dups of placeholder at the lowest free numbers (early
 * in a process, right above what is open). Returns the highest fd of the
 * window, or -errno with none of the dups left open. */
static int dup_low(int placeholder, int *slots, size_t n)
{
    int highest = placeholder;
    for (size_t i = 0; i < n; i++) {
        slots[i] = fcntl(placeholder, F_DUPFD_CLOEXEC, 0);
        if (slots[i] < 0) {
            int r = -errno;
            while (i-- > 0)
                close(slots[i]);
            return r;
        }
        if (slots[i] > highest)
            highest = slots[i];
    }
    return highest;
}

static int reserve_locked(size_t n, act_error *err)
{
    if (window.slots)
        return act_error_set(err, EALREADY, "the spawn fd window is already reserved");
    _cleanup_free_ int *slots = calloc(n, sizeof(int));
    if (!slots)
        return act_error_set(err, ENOMEM, "cannot reserve the spawn fd window: %s",
                             strerror(ENOMEM));
    _cleanup_close_ int placeholder = open("/dev/null", O_RDWR | O_CLOEXEC | O_NOCTTY);
    if (placeholder < 0)
        return act_error_set(err, errno, "cannot reserve the spawn fd window: %s",
                             strerror(errno));
    int highest = dup_low(placeholder, slots, n);
    if (highest < 0)
        return act_error_set(err, -highest, "cannot reserve the spawn fd window: %s",
                             strerror(-highest));
    window.placeholder = TAKE_FD(placeholder);
    window.slots = TAKE_PTR(slots);
    window.n_slots = n;
    window.highest = highest;
    return 0;
}

int cg_spawn_reserve_fds(size_t n, act_error *err)
{
    pthread_mutex_lock(&window.lock);
    int r = reserve_locked(n, err);
    pthread_mutex_unlock(&window.lock);
    return r;
}

int cg_fd_window_enter(const int *needed, size_t n, int *mapped)
{
    assert(needed);
    assert(mapped);
    if (pthread_mutex_trylock(&window.lock) != 0)
        return -1; /* another thread is spawning through it: copy the table */
    if (!window.slots || n > window.n_slots) {
        pthread_mutex_unlock(&window.lock);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (dup3(needed[i], window.slots[i], O_CLOEXEC) < 0) {
            cg_fd_window_leave(i);
            return -1;
        }
        mapped[i] = window.slots[i];
    }
    return window.highest;
}

void cg_fd_window_leave(size_t used)
{
    /* Back to placeholders, which drops the window's hold on what the child
     * needed (a pipe's write end must not stay open here). */
    for (size_t i = 0; i < used; i++)
        dup3(window.placeholder, window.slots[i], O_CLOEXEC);
    pthread_mutex_unlock(&window.lock);
}
