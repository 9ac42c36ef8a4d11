/* Logging for the daemon, the CLI and the libraries.
 *
 * Under journald (JOURNAL_STREAM names our stderr) messages go to the journal
 * with structured fields; elsewhere to stderr with the "<N>" priority prefix
 * that systemd and most log collectors understand. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <syslog.h>

/* Structured fields of one message. Any member may be NULL/0 to leave the
 * field out: HOST=, GENERATION=, BUILD= and REASON= in the journal. */
typedef struct act_log_ctx {
    const char *host;
    uint64_t generation; /* 0: no generation */
    const char *build;   /* "VERSION" or "VERSION@DIGEST" */
    const char *reason;  /* a reason code such as "ready_timeout" */
} act_log_ctx;

/* Logs one message at a syslog priority (LOG_ERR, LOG_INFO, ...). */
void act_log(int priority, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Logs one message with the fields of ctx (which may be NULL). On stderr the
 * fields follow the message as " [HOST=web1 GENERATION=4 REASON=...]". */
void act_log_fields(int priority, const act_log_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Lowest priority that is printed; LOG_INFO unless changed. */
void act_log_set_max_priority(int priority);
int act_log_get_max_priority(void);

/* True when JOURNAL_STREAM names the device and inode of our stderr, which is
 * how systemd says stderr is connected to journald (see sd_journal_stream_fd
 * and systemd.exec(5)). Read afresh at each call; act_log caches it. */
bool act_log_stderr_is_journal(void);

/* Forgets the cached answer of act_log_stderr_is_journal, for a process that
 * has just redirected its stderr. */
void act_log_reset_target(void);
