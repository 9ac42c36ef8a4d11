/* Logging for the daemon, the CLI and the libraries.
 *
 * Under journald (JOURNAL_STREAM names our stderr) messages go to the journal
 * with structured fields; elsewhere to stderr with the "<N>" priority prefix
 * that systemd and most log collectors understand. */
#pragma once

#include <syslog.h>

/* Logs one message at a syslog priority (LOG_ERR, LOG_INFO, ...). */
void act_log(int priority, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Lowest priority that is printed; LOG_INFO unless changed. */
void act_log_set_max_priority(int priority);
int act_log_get_max_priority(void);
