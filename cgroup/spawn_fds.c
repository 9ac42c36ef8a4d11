/* The fd window: low fd numbers held by placeholders, so that a child which
 * starts out sharing our fd table (CLONE_FILES) can unshare it copying only
 * the numbers up to the window (close_range with CLOSE_RANGE_UNSHARE copies
 * just the fds below its first argument). Without it, every spawn copies the
 * whole table at the clone and closes it again at the exec, a cost per open
 * fd: about 1.2 ms per spawn in a daemon holding 10,000 listening sockets on
 * the machine this was written on. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup/spawn_internal.h"

static struct {
    pthread_mutex_t lock;
    int placeholder; /* /dev/null, whose duplicates hold the slots */
    int *slots;
    size_t n_slots;
    int highest;
} window = {.lock = PTHREAD_MUTEX_INITIALIZER, .placeholder = -1, .highest = -1};

int cg_spawn_reserve_fds(size_t n, act_error *err)
{
    pthread_mutex_lock(&window.lock);
    int r = 0;
    if (window.slots) {
        r = act_error_set(err, EALREADY, "the spawn fd window is already reserved");
        goto out;
    }
    int *slots = calloc(n, sizeof(int));
    int placeholder = open("/dev/null", O_RDWR | O_CLOEXEC | O_NOCTTY);
    if (!slots || placeholder < 0) {
        r = act_error_set(err, slots ? errno : ENOMEM, "cannot reserve the spawn fd window: %s",
                          strerror(slots ? errno : ENOMEM));
        free(slots);
        if (placeholder >= 0)
            close(placeholder);
        goto out;
    }
    int highest = placeholder;
    for (size_t i = 0; i < n; i++) {
        /* The lowest free numbers: early in a process, right above what is open. */
        slots[i] = fcntl(placeholder, F_DUPFD_CLOEXEC, 0);
        if (slots[i] < 0) {
            r = act_error_set(err, errno, "cannot reserve the spawn fd window: %s",
                              strerror(errno));
            while (i-- > 0)
                close(slots[i]);
            close(placeholder);
            free(slots);
            goto out;
        }
        if (slots[i] > highest)
            highest = slots[i];
    }
    window.placeholder = placeholder;
    window.slots = slots;
    window.n_slots = n;
    window.highest = highest;
out:
    pthread_mutex_unlock(&window.lock);
    return r;
}

int cg_fd_window_enter(const int *needed, size_t n, int *mapped)
{
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
