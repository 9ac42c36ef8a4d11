/* What the harness's own files share; the tests use harness.h only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harness.h"

void dh_sleep_ms(long ms);
uint64_t dh_now_ms(void);

/* harness_events.c: connects the subscriber and waits until it receives. */
void dh_events_subscribe(dh_daemon *d);

/* harness_observe.c: the file act-e2e-app appends its runs to. */
void dh_marker_path(dh_daemon *d, const char *host, char *out, size_t size);
