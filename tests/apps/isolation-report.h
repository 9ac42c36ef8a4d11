/* act-testapp --isolation-report (see isolation-report.c). */
#pragma once

/* Tries what a host's code should not be able to do and writes the results
 * to $STATE_DIRECTORY/isolation-report. */
void act_isolation_report(void);
