/* What act-hostile tells the test: one line per attempt, in the order they
 * were made, kept in memory and served on GET /results.
 *
 *   attempt NAME succeeded|failed ERRNO DETAIL
 *   untried NAME - DETAIL        the attempt could not even be made (no fork,
 *                                no path): the test counts it as a failure of
 *                                its own, since it proves nothing
 *   control NAME ok|FAILED ERRNO  something a well-behaved app must be able
 *                                to do; a failed control means the failed
 *                                attempts prove nothing either
 *   note NAME TEXT               what a job measured, for the test to print
 *
 * NAME has no spaces (paths are part of it: write:/var/lib/...); ERRNO is
 * the errno's name (EACCES) or "-". */
#pragma once

#include <stdbool.h>
#include <stddef.h>

void report_attempt(const char *name, bool succeeded, int error, const char *detail);
void report_untried(const char *name, const char *detail);
void report_control(const char *name, bool ok, int error);
void report_note(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends a line that a job child sent through its pipe, as it is. */
void report_line(const char *line);

/* Everything reported so far, NUL-terminated. */
const char *report_text(void);
size_t report_length(void);

/* "EACCES", or "-" for 0. */
const char *report_errno_name(int error);
