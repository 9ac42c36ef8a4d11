/* The watchdog of a test (see harness.h): a thread that, once the test has
 * run past its budget, says what the test was doing and what it waited
 * for, prints the test thread's stack and every daemon's log, and aborts,
 * so that a hang fails with its reason instead of meeting meson's timeout
 * with its output cut. A thread of its own, because the hang may be in a
 * call that no timeout reaches (a library's close, a blocking read). */
#include "harness.h"
#include "harness_internal.h"

#include <errno.h>
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WATCHED_MAX 8

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static bool thread_started;
static pthread_t thread;
static pthread_t test_thread;
static uint64_t deadline_ms; /* 0: disarmed */
static int budget_ms;
static char step[512];
static uint64_t step_ms;
static char waiting[512];
static uint64_t waiting_ms;
static const dh_daemon *watched[WATCHED_MAX];

/* The test thread's stack, written by the test thread itself on the
 * watchdog's signal: only that thread can walk it. */
static volatile sig_atomic_t stack_written;

static void write_stack(int sig)
{
    void *frames[64];
    int n = backtrace(frames, 64);
    static const char title[] = "---- the test thread's stack ----\n";
    ssize_t ignored = write(STDERR_FILENO, title, sizeof(title) - 1);
    (void)ignored;
    backtrace_symbols_fd(frames, n, STDERR_FILENO);
    stack_written = 1;
}

static void print_stack_of_test_thread(void)
{
    stack_written = 0;
    if (pthread_kill(test_thread, SIGURG) != 0)
        return;
    for (int i = 0; i < 100 && !stack_written; i++)
        dh_sleep_ms(10);
}

static void expire(void)
{
    uint64_t now = dh_now_ms();
    fprintf(stderr,
            "\n==== WATCHDOG: the test ran past its budget of %d s ====\n"
            "step:        %s (for %llu s)\n"
            "waiting for: %s (for %llu s)\n",
            budget_ms / 1000, step[0] ? step : "(none named)",
            (unsigned long long)(step_ms ? (now - step_ms) / 1000 : 0),
            waiting[0] ? waiting : "(nothing named)",
            (unsigned long long)(waiting_ms ? (now - waiting_ms) / 1000 : 0));
    fflush(stderr);
    print_stack_of_test_thread();
    for (size_t i = 0; i < WATCHED_MAX; i++) {
        if (!watched[i])
            continue;
        fprintf(stderr, "---- daemon of box %s (pid %d) ----\n", watched[i]->box,
                (int)watched[i]->drv.pid);
        dd_dump_log(&watched[i]->drv);
    }
    fprintf(stderr, "==== WATCHDOG: aborting; the daemons get SIGTERM as their parent dies, "
                    "and their temp dirs are left for a person to look at ====\n");
    fflush(stderr);
    abort();
}

static void *watch(void *unused)
{
    pthread_mutex_lock(&lock);
    for (;;) {
        if (!deadline_ms) {
            pthread_cond_wait(&changed, &lock);
            continue;
        }
        uint64_t now = dh_now_ms();
        if (now >= deadline_ms)
            expire(); /* under the lock: nothing changes while it prints */
        /* Wakes at least once a second: the deadline is on the monotonic
         * clock, the condition variable's wait on the wall clock. */
        uint64_t wait_ms = deadline_ms - now < 1000 ? deadline_ms - now : 1000;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += (time_t)(wait_ms / 1000);
        until.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&changed, &lock, &until);
    }
    return NULL;
}

void dh_watchdog_arm(int budget)
{
    /* backtrace() loads what it needs at its first call, which must not
     * be in the signal handler. */
    void *frame;
    backtrace(&frame, 1);
    struct sigaction action = {.sa_handler = write_stack};
    sigemptyset(&action.sa_mask);
    sigaction(SIGURG, &action, NULL);
    pthread_mutex_lock(&lock);
    test_thread = pthread_self();
    budget_ms = budget;
    deadline_ms = dh_now_ms() + (uint64_t)budget;
    step[0] = waiting[0] = '\0';
    step_ms = waiting_ms = 0;
    if (!thread_started && pthread_create(&thread, NULL, watch, NULL) == 0) {
        pthread_detach(thread);
        thread_started = true;
    }
    pthread_cond_signal(&changed);
    pthread_mutex_unlock(&lock);
}

void dh_watchdog_disarm(void)
{
    pthread_mutex_lock(&lock);
    deadline_ms = 0;
    pthread_cond_signal(&changed);
    pthread_mutex_unlock(&lock);
}

void dh_watchdog_watch(const dh_daemon *d, bool watch_it)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < WATCHED_MAX; i++) {
        if (watch_it ? watched[i] == NULL : watched[i] == d) {
            watched[i] = watch_it ? d : NULL;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
}

static void set_text(char *text, size_t size, uint64_t *since, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

static void set_text(char *text, size_t size, uint64_t *since, const char *fmt, va_list ap)
{
    char formatted[512];
    vsnprintf(formatted, sizeof(formatted), fmt, ap);
    pthread_mutex_lock(&lock);
    snprintf(text, size, "%s", formatted);
    *since = dh_now_ms();
    pthread_mutex_unlock(&lock);
}

void dh_step(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_text(step, sizeof(step), &step_ms, fmt, ap);
    va_end(ap);
}

void dh_waiting_for(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_text(waiting, sizeof(waiting), &waiting_ms, fmt, ap);
    va_end(ap);
}
