#include "common/log.h"

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* The location fields sd-journal would add (CODE_FILE=log.c) name this file
 * for every message, which says nothing. */
#define SD_JOURNAL_SUPPRESS_LOCATION 1
#include <systemd/sd-journal.h>

#include "common/cleanup.h"

static int max_priority = LOG_INFO;

/* -1: not yet decided; 0: stderr; 1: journal. Written and read atomically
 * because NNG's threads log too. */
static int target_is_journal = -1;

void act_log_set_max_priority(int priority)
{
    max_priority = priority;
}

int act_log_get_max_priority(void)
{
    return max_priority;
}

bool act_log_stderr_is_journal(void)
{
    const char *stream = getenv("JOURNAL_STREAM");
    if (!stream)
        return false;
    unsigned long long dev, ino;
    int consumed = 0;
    if (sscanf(stream, "%llu:%llu%n", &dev, &ino, &consumed) != 2 || stream[consumed] != '\0')
        return false;
    struct stat st;
    if (fstat(STDERR_FILENO, &st) < 0)
        return false;
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void act_log_reset_target(void)
{
    __atomic_store_n(&target_is_journal, -1, __ATOMIC_RELAXED);
}

static bool use_journal(void)
{
    int cached = __atomic_load_n(&target_is_journal, __ATOMIC_RELAXED);
    if (cached < 0) {
        /* sd_journal_sendv quietly drops messages when journald's socket
         * is missing; a stderr that still works is the better place then. */
        cached = act_log_stderr_is_journal() && access("/run/systemd/journal/socket", W_OK) == 0;
        __atomic_store_n(&target_is_journal, cached, __ATOMIC_RELAXED);
    }
    return cached == 1;
}

/* One journal entry; returns a negative errno when journald is unreachable,
 * so the caller falls back to stderr rather than losing the message. */
static int send_to_journal(int priority, const act_log_ctx *ctx, const char *message)
{
    char prio_field[32], gen_field[48];
    _cleanup_free_ char *msg_field = NULL, *host_field = NULL, *build_field = NULL,
                        *reason_field = NULL;
    struct iovec iov[6];
    int n = 0;

    if (asprintf(&msg_field, "MESSAGE=%s", message) < 0)
        return -1;
    iov[n++] = (struct iovec){msg_field, strlen(msg_field)};
    snprintf(prio_field, sizeof(prio_field), "PRIORITY=%d", priority);
    iov[n++] = (struct iovec){prio_field, strlen(prio_field)};
    if (ctx && ctx->host && asprintf(&host_field, "HOST=%s", ctx->host) >= 0)
        iov[n++] = (struct iovec){host_field, strlen(host_field)};
    if (ctx && ctx->generation) {
        snprintf(gen_field, sizeof(gen_field), "GENERATION=%" PRIu64, ctx->generation);
        iov[n++] = (struct iovec){gen_field, strlen(gen_field)};
    }
    if (ctx && ctx->build && asprintf(&build_field, "BUILD=%s", ctx->build) >= 0)
        iov[n++] = (struct iovec){build_field, strlen(build_field)};
    if (ctx && ctx->reason && asprintf(&reason_field, "REASON=%s", ctx->reason) >= 0)
        iov[n++] = (struct iovec){reason_field, strlen(reason_field)};
    return sd_journal_sendv(iov, n);
}

static void write_to_stderr(int priority, const act_log_ctx *ctx, const char *message)
{
    char fields[512] = "";
    size_t used = 0;
    if (ctx) {
        /* A field that does not fit is dropped whole, never cut in half. */
#define ADD_FIELD(...)                                                                             \
    do {                                                                                           \
        int w_ = snprintf(fields + used, sizeof(fields) - used, __VA_ARGS__);                      \
        if (w_ > 0 && (size_t)w_ < sizeof(fields) - used)                                          \
            used += (size_t)w_;                                                                    \
        else                                                                                       \
            fields[used] = '\0';                                                                   \
    } while (0)
        if (ctx->host)
            ADD_FIELD(" HOST=%s", ctx->host);
        if (ctx->generation)
            ADD_FIELD(" GENERATION=%" PRIu64, ctx->generation);
        if (ctx->build)
            ADD_FIELD(" BUILD=%s", ctx->build);
        if (ctx->reason)
            ADD_FIELD(" REASON=%s", ctx->reason);
#undef ADD_FIELD
    }
    /* One fprintf per line, so lines of concurrent threads do not interleave. */
    if (used)
        fprintf(stderr, "<%d>%s [%s]\n", priority, message, fields + 1);
    else
        fprintf(stderr, "<%d>%s\n", priority, message);
}

static void log_message(int priority, const act_log_ctx *ctx, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

static void log_message(int priority, const act_log_ctx *ctx, const char *fmt, va_list ap)
{
    if (priority > max_priority)
        return;
    char message[4096];
    vsnprintf(message, sizeof(message), fmt, ap);
    if (use_journal() && send_to_journal(priority, ctx, message) >= 0)
        return;
    write_to_stderr(priority, ctx, message);
}

void act_log(int priority, const char *fmt, ...)
{
    assert(fmt);
    assert(priority >= LOG_EMERG && priority <= LOG_DEBUG);
    va_list ap;
    va_start(ap, fmt);
    log_message(priority, NULL, fmt, ap);
    va_end(ap);
}

void act_log_fields(int priority, const act_log_ctx *ctx, const char *fmt, ...)
{
    assert(fmt);
    assert(priority >= LOG_EMERG && priority <= LOG_DEBUG);
    va_list ap;
    va_start(ap, fmt);
    log_message(priority, ctx, fmt, ap);
    va_end(ap);
}
