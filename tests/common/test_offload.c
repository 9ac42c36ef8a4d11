/* act_offload: work runs on worker threads, done() on the loop; a lane keeps
 * its order, different lanes run side by side, and freeing runs the work
 * already submitted but calls no further done(). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/offload.h"

typedef struct run {
    sd_event *loop;
    act_offload *offload;
    atomic_int next_order;
    int done_count;
    int expected;
} run;

typedef struct job {
    run *run;
    int index;
    int order;             /* when its work ran, among all jobs */
    pthread_t work_thread; /* where work() ran */
    pthread_t done_thread; /* where done() ran */
    bool done;
} job;

static void record_work(void *data)
{
    job *j = data;
    j->work_thread = pthread_self();
    j->order = atomic_fetch_add(&j->run->next_order, 1);
}

static void record_done(void *data)
{
    job *j = data;
    j->done_thread = pthread_self();
    j->done = true;
    if (++j->run->done_count == j->run->expected)
        sd_event_exit(j->run->loop, 0);
}

static void start(run *r, unsigned threads)
{
    assert_int_equal(sd_event_new(&r->loop), 0);
    act_error err = {0};
    assert_int_equal(act_offload_new(r->loop, threads, &r->offload, &err), 0);
}

static void finish(run *r)
{
    act_offload_free(r->offload);
    sd_event_unref(r->loop);
}

static void loop_until_done(run *r)
{
    /* A stuck test fails instead of hanging: the loop gives up after 10 s. */
    sd_event_source *deadline = NULL;
    assert_true(sd_event_add_time_relative(r->loop, &deadline, CLOCK_MONOTONIC, 10 * 1000000, 0,
                                           NULL, (void *)(intptr_t)1) >= 0);
    assert_int_equal(sd_event_loop(r->loop), 0);
    sd_event_source_unref(deadline);
    assert_int_equal(r->done_count, r->expected);
}

/* The nice value of the thread a work() ran on, and of the loop's. */
typedef struct nice_job {
    run *run;
    int work_nice;
} nice_job;

static int own_nice(void)
{
    errno = 0;
    return getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
}

static void record_nice(void *data)
{
    nice_job *j = data;
    j->work_nice = own_nice();
}

static void nice_done(void *data)
{
    nice_job *j = data;
    if (++j->run->done_count == j->run->expected)
        sd_event_exit(j->run->loop, 0);
}

/* Background workers run at ACT_OFFLOAD_BACKGROUND_NICE above the loop's
 * nice value, the others at the loop's: a large build's hashing leaves the
 * CPU to the wakes (and the loop itself keeps its priority). */
static int nice_of_work(bool background)
{
    run r = {.expected = 1};
    assert_int_equal(sd_event_new(&r.loop), 0);
    act_error err = {0};
    assert_int_equal(background ? act_offload_new_background(r.loop, 1, &r.offload, &err)
                                : act_offload_new(r.loop, 1, &r.offload, &err),
                     0);
    nice_job j = {.run = &r, .work_nice = -100};
    assert_int_equal(act_offload_submit(r.offload, 0, record_nice, nice_done, &j, &err), 0);
    loop_until_done(&r);
    finish(&r);
    return j.work_nice;
}

static void background_workers_run_at_a_lower_priority(void **state)
{
    (void)state;
    int loop_nice = own_nice();
    int expected = loop_nice + ACT_OFFLOAD_BACKGROUND_NICE > 19 ? 19
                                                                 : loop_nice + ACT_OFFLOAD_BACKGROUND_NICE;
    assert_int_equal(nice_of_work(false), loop_nice);
    assert_int_equal(nice_of_work(true), expected);
    assert_int_equal(own_nice(), loop_nice);
}

static void a_lane_keeps_its_order_and_done_runs_on_the_loop(void **state)
{
    run r = {.expected = 100};
    start(&r, 4);
    job jobs[100];
    act_error err = {0};
    for (int i = 0; i < 100; i++) {
        jobs[i] = (job){.run = &r, .index = i};
        assert_int_equal(act_offload_submit(r.offload, 7, record_work, record_done, &jobs[i], &err),
                         0);
    }
    loop_until_done(&r);
    for (int i = 0; i < 100; i++) {
        assert_true(jobs[i].done);
        assert_int_equal(jobs[i].order, i);
        assert_true(pthread_equal(jobs[i].done_thread, pthread_self()));
        assert_false(pthread_equal(jobs[i].work_thread, pthread_self()));
    }
    finish(&r);
}

/* Two jobs in different lanes that can only finish together: one waits for
 * the other's signal. Run one after the other, they would never finish. */
typedef struct rendezvous {
    job base;
    pthread_mutex_t *lock;
    pthread_cond_t *cond;
    bool *flag;
    bool waits;
    bool met;
} rendezvous;

static void meet(void *data)
{
    rendezvous *j = data;
    pthread_mutex_lock(j->lock);
    if (j->waits) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 5;
        while (!*j->flag && pthread_cond_timedwait(j->cond, j->lock, &until) == 0)
            ;
        j->met = *j->flag;
    } else {
        *j->flag = true;
        pthread_cond_broadcast(j->cond);
        j->met = true;
    }
    pthread_mutex_unlock(j->lock);
}

static void different_lanes_run_side_by_side(void **state)
{
    run r = {.expected = 2};
    start(&r, 2);
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
    bool flag = false;
    rendezvous waiter = {.base = {.run = &r}, .lock = &lock, .cond = &cond, .flag = &flag,
                         .waits = true};
    rendezvous signaller = waiter;
    signaller.waits = false;
    act_error err = {0};
    assert_int_equal(act_offload_submit(r.offload, 0, meet, record_done, &waiter, &err), 0);
    assert_int_equal(act_offload_submit(r.offload, 1, meet, record_done, &signaller, &err), 0);
    loop_until_done(&r);
    assert_true(waiter.met);
    assert_true(signaller.met);
    finish(&r);
}

typedef struct slow_job {
    job base;
    atomic_bool started, finished, dropped;
} slow_job;

static void slow_work(void *data)
{
    slow_job *j = data;
    atomic_store(&j->started, true);
    usleep(100 * 1000);
    atomic_store(&j->finished, true);
}

static void never_done(void *data)
{
    fail_msg("done() ran after the offload was freed");
}

static void free_runs_submitted_work_and_calls_no_done(void **state)
{
    run r = {0};
    start(&r, 1);
    slow_job running = {.base = {.run = &r}};
    slow_job queued = {.base = {.run = &r}};
    act_error err = {0};
    assert_int_equal(act_offload_submit(r.offload, 0, slow_work, never_done, &running, &err), 0);
    assert_int_equal(act_offload_submit(r.offload, 0, slow_work, never_done, &queued, &err), 0);
    /* Once the worker runs the first job, the second waits behind it. */
    for (int i = 0; i < 5000 && !atomic_load(&running.started); i++)
        usleep(1000);
    assert_true(atomic_load(&running.started));
    act_offload_free(r.offload);
    assert_true(atomic_load(&running.finished));
    assert_true(atomic_load(&queued.finished));
    /* Nothing completes later on the loop either. */
    assert_true(sd_event_run(r.loop, 50 * 1000) >= 0);
    sd_event_unref(r.loop);
}

static void count_drop(void *data)
{
    slow_job *j = data;
    atomic_store(&j->dropped, true);
}

/* A droppable job that ran but whose done() the freed offload will not
 * call is handed to its drop(), so its owner can free what it holds. */
static void free_drops_what_it_will_not_complete(void **state)
{
    run r = {0};
    start(&r, 1);
    slow_job ran = {.base = {.run = &r}};
    act_error err = {0};
    assert_int_equal(
        act_offload_submit_droppable(r.offload, 0, slow_work, never_done, count_drop, &ran, &err),
        0);
    act_offload_free(r.offload);
    assert_true(atomic_load(&ran.finished));
    assert_true(atomic_load(&ran.dropped));
    assert_true(sd_event_run(r.loop, 50 * 1000) >= 0);
    sd_event_unref(r.loop);
}

static void free_inside_done(void *data)
{
    job *j = data;
    j->done = true;
    j->run->done_count++;
    act_offload_free(j->run->offload);
    sd_event_exit(j->run->loop, 0);
}

static void freeing_from_a_done_stops_the_rest(void **state)
{
    run r = {.expected = 1};
    start(&r, 1);
    job first = {.run = &r}, second = {.run = &r};
    act_error err = {0};
    assert_int_equal(act_offload_submit(r.offload, 0, record_work, free_inside_done, &first, &err),
                     0);
    assert_int_equal(act_offload_submit(r.offload, 0, record_work, never_done, &second, &err), 0);
    loop_until_done(&r);
    assert_true(first.done);
    assert_false(second.done);
    sd_event_unref(r.loop);
}

static void lanes_of_names_are_stable(void **state)
{
    assert_int_equal(act_offload_lane("web1"), act_offload_lane("web1"));
    assert_int_not_equal(act_offload_lane("web1"), act_offload_lane("web2"));
    act_error err = {0};
    act_offload *offload = NULL;
    sd_event *loop = NULL;
    assert_int_equal(sd_event_new(&loop), 0);
    assert_int_equal(act_offload_new(loop, 0, &offload, &err), -EINVAL);
    sd_event_unref(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_lane_keeps_its_order_and_done_runs_on_the_loop),
        cmocka_unit_test(different_lanes_run_side_by_side),
        cmocka_unit_test(free_runs_submitted_work_and_calls_no_done),
        cmocka_unit_test(free_drops_what_it_will_not_complete),
        cmocka_unit_test(freeing_from_a_done_stops_the_rest),
        cmocka_unit_test(lanes_of_names_are_stable),
        cmocka_unit_test(background_workers_run_at_a_lower_priority),
    };
    return cmocka_run_group_tests_name("offload", tests, NULL, NULL);
}
