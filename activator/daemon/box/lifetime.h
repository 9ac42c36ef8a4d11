/* The daemon's own record across its restarts (<state>/daemon.json): how
 * many times it started on this box, and when it last handed over to its
 * successor (systemctl restart). activatorctl version shows both. */
#pragma once

#include "activator/daemon/host/context.h"

/* Reads the record (a missing or unreadable one counts from zero), counts
 * this start and writes it back. Never fails: a record that cannot be
 * written is logged. */
void ad_lifetime_start(ad_daemon *daemon, ad_lifetime *out);
/* Notes a handover now, in the record and in *lifetime. */
void ad_lifetime_handover(ad_daemon *daemon, ad_lifetime *lifetime);
