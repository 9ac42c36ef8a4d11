/* Worker threads for blocking work, completing on the loop (offload.h).
 *
 * Each worker owns one queue, and a lane always maps to the same worker, so
 * a lane's jobs run in order without any further bookkeeping. Finished jobs
 * go to one done list, and an eventfd on the loop says there is something
 * on it. */
#include "common/offload.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct offload_job {
    struct offload_job *next;
    act_offload_work_fn work;
    act_offload_done_fn done;
    act_offload_done_fn drop; /* or NULL */
    void *job;
} offload_job;

typedef struct worker {
    act_offload *offload;
    pthread_t thread;
    bool started;
    pthread_cond_t wake;      /* a job was queued, or stop */
    offload_job *head, *tail; /* queued, under offload->lock */
} worker;

struct act_offload {
    pthread_mutex_t lock;
    bool stop;
    worker *workers;
    unsigned n_workers;
    offload_job *done_head, *done_tail; /* finished, under lock */
    int event_fd;
    sd_event_source *source;
    bool dispatching;     /* inside a done() */
    bool background;      /* workers run at ACT_OFFLOAD_BACKGROUND_NICE */
    bool free_requested; /* freed from inside a done(): finish after it */
};

static void append(offload_job **head, offload_job **tail, offload_job *job)
{
    job->next = NULL;
    if (*tail)
        (*tail)->next = job;
    else
        *head = job;
    *tail = job;
}

static offload_job *pop(offload_job **head, offload_job **tail)
{
    offload_job *job = *head;
    if (job) {
        *head = job->next;
        if (!*head)
            *tail = NULL;
    }
    return job;
}

static void *worker_main(void *arg)
{
    worker *self = arg;
    act_offload *offload = self->offload;
    /* Lowering one's own priority needs no privilege; a failure leaves the
     * worker as fast as it was, which is only less polite. */
    if (offload->background) {
        id_t self_tid = (id_t)syscall(SYS_gettid);
        errno = 0;
        int nice_now = getpriority(PRIO_PROCESS, self_tid);
        if (errno == 0) {
            int lower = nice_now + ACT_OFFLOAD_BACKGROUND_NICE;
            (void)setpriority(PRIO_PROCESS, self_tid, lower > 19 ? 19 : lower);
        }
    }
    pthread_mutex_lock(&offload->lock);
    for (;;) {
        while (!offload->stop && !self->head)
            pthread_cond_wait(&self->wake, &offload->lock);
        /* Stopping still runs what was queued: a write asked for happens. */
        if (!self->head)
            break;
        offload_job *job = pop(&self->head, &self->tail);
        pthread_mutex_unlock(&offload->lock);
        job->work(job->job);
        pthread_mutex_lock(&offload->lock);
        append(&offload->done_head, &offload->done_tail, job);
        uint64_t one = 1;
        /* The counter cannot overflow: the loop drains it on every wakeup. */
        (void)!write(offload->event_fd, &one, sizeof(one));
    }
    pthread_mutex_unlock(&offload->lock);
    return NULL;
}

static void drop_job(offload_job *job)
{
    if (job->drop)
        job->drop(job->job);
    free(job);
}

static void release(act_offload *offload)
{
    for (offload_job *job; (job = pop(&offload->done_head, &offload->done_tail));)
        drop_job(job);
    for (unsigned i = 0; i < offload->n_workers; i++) {
        for (offload_job *job; (job = pop(&offload->workers[i].head, &offload->workers[i].tail));)
            drop_job(job);
        pthread_cond_destroy(&offload->workers[i].wake);
    }
    sd_event_source_disable_unref(offload->source);
    if (offload->event_fd >= 0)
        close(offload->event_fd);
    pthread_mutex_destroy(&offload->lock);
    free(offload->workers);
    free(offload);
}

/* One done() per pass, with the lock released: a done() may submit more
 * work or free the offload. */
static int on_done(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    act_offload *offload = userdata;
    uint64_t count;
    (void)!read(fd, &count, sizeof(count));
    offload->dispatching = true;
    for (;;) {
        pthread_mutex_lock(&offload->lock);
        offload_job *job = pop(&offload->done_head, &offload->done_tail);
        pthread_mutex_unlock(&offload->lock);
        if (!job)
            break;
        act_offload_done_fn done = job->done;
        void *data = job->job;
        free(job);
        done(data);
        if (offload->free_requested)
            break;
    }
    offload->dispatching = false;
    if (offload->free_requested)
        release(offload);
    return 0;
}

static int offload_new(sd_event *loop, unsigned n_threads, bool background, act_offload **out,
                       act_error *err);

int act_offload_new(sd_event *loop, unsigned n_threads, act_offload **out, act_error *err)
{
    return offload_new(loop, n_threads, false, out, err);
}

int act_offload_new_background(sd_event *loop, unsigned n_threads, act_offload **out,
                               act_error *err)
{
    return offload_new(loop, n_threads, true, out, err);
}

static int offload_new(sd_event *loop, unsigned n_threads, bool background, act_offload **out,
                       act_error *err)
{
    assert(loop);
    assert(out);
    if (n_threads == 0)
        return act_error_set(err, EINVAL, "offload: no worker threads asked for");
    act_offload *offload = calloc(1, sizeof(*offload));
    worker *workers = calloc(n_threads, sizeof(*workers));
    if (!offload || !workers) {
        free(offload);
        free(workers);
        return act_error_set(err, ENOMEM, "offload: out of memory");
    }
    pthread_mutex_init(&offload->lock, NULL);
    for (unsigned i = 0; i < n_threads; i++)
        pthread_cond_init(&workers[i].wake, NULL);
    offload->workers = workers;
    offload->n_workers = n_threads;
    offload->background = background;
    offload->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    int r = offload->event_fd < 0 ? -errno : 0;
    if (r == 0)
        r = sd_event_add_io(loop, &offload->source, offload->event_fd, EPOLLIN, on_done, offload);
    if (r < 0) {
        release(offload);
        return act_error_set(err, -r, "offload: cannot watch its eventfd: %s", strerror(-r));
    }
    for (unsigned i = 0; i < n_threads; i++) {
        workers[i].offload = offload;
        if ((r = pthread_create(&workers[i].thread, NULL, worker_main, &workers[i])) != 0) {
            act_offload_free(offload);
            return act_error_set(err, r, "offload: cannot start a worker thread: %s",
                                 strerror(r));
        }
        workers[i].started = true;
    }
    *out = offload;
    return 0;
}

int act_offload_submit(act_offload *offload, unsigned lane, act_offload_work_fn work,
                       act_offload_done_fn done, void *job, act_error *err)
{
    return act_offload_submit_droppable(offload, lane, work, done, NULL, job, err);
}

int act_offload_submit_droppable(act_offload *offload, unsigned lane, act_offload_work_fn work,
                                 act_offload_done_fn done, act_offload_done_fn drop, void *job,
                                 act_error *err)
{
    assert(offload);
    assert(work);
    assert(done);
    offload_job *queued = malloc(sizeof(*queued));
    if (!queued)
        return act_error_set(err, ENOMEM, "offload: out of memory");
    *queued = (offload_job){.work = work, .done = done, .drop = drop, .job = job};
    worker *target = &offload->workers[lane % offload->n_workers];
    pthread_mutex_lock(&offload->lock);
    append(&target->head, &target->tail, queued);
    pthread_cond_signal(&target->wake);
    pthread_mutex_unlock(&offload->lock);
    return 0;
}

void act_offload_free(act_offload *offload)
{
    if (!offload || offload->free_requested)
        return;
    pthread_mutex_lock(&offload->lock);
    offload->stop = true;
    for (unsigned i = 0; i < offload->n_workers; i++)
        pthread_cond_signal(&offload->workers[i].wake);
    pthread_mutex_unlock(&offload->lock);
    for (unsigned i = 0; i < offload->n_workers; i++)
        if (offload->workers[i].started)
            pthread_join(offload->workers[i].thread, NULL);
    if (offload->dispatching)
        offload->free_requested = true; /* on_done releases it after the done() */
    else
        release(offload);
}

unsigned act_offload_lane(const char *name)
{
    assert(name);
    /* FNV-1a: stable and spreads short names well. */
    uint32_t hash = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        hash = (hash ^ *p) * 16777619u;
    return hash;
}
