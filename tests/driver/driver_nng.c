/* Closing the driver's NNG sockets within a bound (see daemon_driver.h). */
#include "tests/driver/daemon_driver.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

/* The driver avoids closing in the moments NNG 1.5.2 hangs in (no redial
 * of a gone daemon), and bounds the close anyway. */

typedef struct socket_close {
    nng_socket socket;
    pthread_mutex_t lock;
    pthread_cond_t done_cond;
    bool done;
    int refs; /* the closing thread's and the waiter's */
} socket_close;

static void socket_close_unref(socket_close *c)
{
    pthread_mutex_lock(&c->lock);
    bool last = --c->refs == 0;
    pthread_mutex_unlock(&c->lock);
    if (!last)
        return;
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->done_cond);
    free(c);
}

static void *close_socket(void *arg)
{
    socket_close *c = arg;
    nng_close(c->socket);
    pthread_mutex_lock(&c->lock);
    c->done = true;
    pthread_cond_signal(&c->done_cond);
    pthread_mutex_unlock(&c->lock);
    socket_close_unref(c);
    return NULL;
}

bool dd_nng_close_bounded(nng_socket socket)
{
    socket_close *c = calloc(1, sizeof(*c));
    if (!c) {
        nng_close(socket);
        return true;
    }
    *c = (socket_close){.socket = socket, .refs = 2};
    pthread_mutex_init(&c->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&c->done_cond, &attr);
    pthread_condattr_destroy(&attr);
    pthread_t thread;
    if (pthread_create(&thread, NULL, close_socket, c) != 0) {
        nng_close(socket);
        c->refs = 1;
        socket_close_unref(c);
        return true;
    }
    pthread_detach(thread);
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += DD_NNG_CLOSE_TIMEOUT_MS / 1000;
    pthread_mutex_lock(&c->lock);
    while (!c->done && pthread_cond_timedwait(&c->done_cond, &c->lock, &until) != ETIMEDOUT)
        ;
    bool done = c->done;
    pthread_mutex_unlock(&c->lock);
    socket_close_unref(c);
    return done;
}

