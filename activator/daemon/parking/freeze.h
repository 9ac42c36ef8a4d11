/* Freeze parking (ParkMode=freeze): an idle serving generation is frozen
 * with the cgroup v2 freezer instead of retired, and the first readable
 * listening socket thaws it, before anything else happens for the host.
 *
 * To the pipeline a frozen host still serves: the generation keeps its
 * admission, its sockets and its leaf, and the claim says phase frozen
 * with its handle. While frozen the daemon watches its own copy of the
 * listening sockets; a connection thaws the generation once the claim
 * (ThawCheck=claim, one store read) still names this box and this
 * admission, or at once with ThawCheck=cached (the claim watch is
 * trusted). A claim that names another box retires the generation instead
 * (killed frozen), and the waiting client is not served by it. A generation
 * frozen for FrozenMaxSec= is parked as an idle one is; memory pressure
 * (parking/pressure.c) retires the ones frozen longest ago first. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "activator/daemon/host/host.h"

/* Starts freezing host's serving generation: its idle watch and its
 * supervision stop, its sockets are watched (a client during the freeze
 * thaws it again at once), and once cgroup.events says frozen the record,
 * the claim and the events say so. -EBUSY (err says why) when the host is
 * not serving, a swap or checkpoint is in flight, or it is frozen already;
 * a failure to freeze leaves it serving. */
int ad_freeze_start(ad_host *host, const char *why, act_error *err);

/* What follows IdleTimeoutSec= without a connection (the idle watch's
 * on_idle): with ParkMode=freeze the serving generation is frozen, else, or
 * when it cannot be frozen, the host is parked: an idle host never stays
 * running. */
void ad_freeze_or_park(ad_host *host);

/* Thaws host now (an operator's thaw, a warm wake, a swap): no claim read,
 * since whoever asked checks what it needs. why goes into the thawed event.
 * -ESRCH when the host is not frozen. */
int ad_freeze_thaw(ad_host *host, const char *why, act_error *err);

/* The generation stops being the host's frozen one (parked, exited,
 * failed, a reload removed it): what watched it ends. Its retirement thaws
 * it as it must (generations/retire.c). */
void ad_freeze_forget(ad_host *host);

/* A handover: nothing is watched any more. A frozen generation stays
 * frozen (its record says so, and the next daemon resumes it frozen); one
 * still freezing runs again, since its record says serving. */
void ad_freeze_hand_over(ad_host *host);

/* The freeze of a generation a previous daemon left frozen (its record
 * says so): frozen again, and watched for connections as before. */
void ad_freeze_resume(ad_host *host);

/* A frozen host's sockets are watched for connections again (after a
 * fence, which left a connection waiting). */
void ad_freeze_watch_again(ad_host *host);

/* True while host's generation is frozen or freezing; *since_usec (may be
 * NULL) gets the wall clock at which it froze, 0 while still freezing. */
bool ad_freeze_active(const ad_host *host, uint64_t *since_usec);

/* Of the daemon's frozen hosts, the one frozen longest ago (least recently
 * used); NULL when none is. */
ad_host *ad_freeze_coldest(ad_daemon *daemon);

/* Retires host's frozen generation, as an idle park (thawed, SIGTERM,
 * StopTimeoutSec=, kill, proof). why is logged. */
void ad_freeze_retire(ad_host *host, const char *why);

/* How many hosts are frozen now (the metrics gauge). */
size_t ad_freeze_count(const ad_daemon *daemon);
