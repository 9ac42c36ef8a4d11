#include "activator/control/ipc_heal.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "activator/control/nng_errno.h"
#include "common/log.h"

/* Timers may fire this late, so that they share wake-ups with the loop's
 * other work. */
#define TIMER_ACCURACY_USEC (100 * 1000ull)

struct ipc_heal {
    ipc_heal_options options;
    nng_listener listener;
    bool listening;
    sd_event_source *timer;
    nng_socket probe;
    bool probing;           /* probe is open and dialing; the timer judges it */
    atomic_bool probe_seen; /* set by an NNG thread when the probe's pipe joined */
    bool failing;           /* listening again failed; said once until it works */
    pid_t pid;
    unsigned relistens;
};

int ipc_heal_new(const ipc_heal_options *options, ipc_heal **out, act_error *err)
{
    ipc_heal *heal = calloc(1, sizeof(*heal));
    if (!heal)
        return act_error_set(err, ENOMEM, "out of memory for %s=%s", options->what, options->url);
    heal->options = *options;
    heal->pid = getpid();
    atomic_init(&heal->probe_seen, false);
    *out = heal;
    return 0;
}

static int listen_once(ipc_heal *heal, act_error *err)
{
    const ipc_heal_options *o = &heal->options;
    nng_listener listener;
    int rv = nng_listener_create(&listener, o->socket, o->url);
    if (rv != 0)
        return act_error_set(err, ctrl_nng_errno(rv), "%s=%s: %s; use ipc:///path/%s.ipc",
                             o->what, o->url, nng_strerror(rv),
                             strcmp(o->what, "Events") == 0 ? "events" : "control");
    rv = nng_listener_set_int(listener, NNG_OPT_IPC_PERMISSIONS, o->mode);
    if (rv != 0) {
        nng_listener_close(listener);
        return act_error_set(err, ctrl_nng_errno(rv), "%s=%s: setting mode %o: %s", o->what,
                             o->url, (unsigned)o->mode, nng_strerror(rv));
    }
    rv = nng_listener_start(listener, 0);
    if (rv != 0) {
        nng_listener_close(listener);
        return act_error_set(err, ctrl_nng_errno(rv),
                             "%s=%s: listening: %s; check the directory exists and no "
                             "other activatord uses it",
                             o->what, o->url, nng_strerror(rv));
    }
    heal->listener = listener;
    heal->listening = true;
    /* Owner and ACL are of the file, which listening made anew. */
    return ctrl_ipc_socket_grant(o->url, o->access, err);
}

/* Loop thread: a probe got no pipe through. Closing the listener leaves the
 * pipes it delivered joined (requests in flight on them are answered), and
 * takes the wedged state with it. */
static void listen_again(ipc_heal *heal)
{
    const ipc_heal_options *o = &heal->options;
    if (heal->listening) {
        nng_listener_close(heal->listener);
        heal->listening = false;
    }
    act_error err = {0};
    int r = listen_once(heal, &err);
    if (r < 0) {
        if (!heal->failing)
            act_log(LOG_ERR, "%s=%s: a probe connection never reached the socket and listening "
                             "again failed: %s; retrying every %llu s",
                    o->what, o->url, err.message, IPC_HEAL_PERIOD_USEC / 1000000);
        heal->failing = true;
        return;
    }
    heal->relistens++;
    if (heal->failing)
        act_log(LOG_NOTICE, "%s=%s: listening again", o->what, o->url);
    else
        act_log(LOG_WARNING,
                "%s=%s: a probe connection did not reach the socket within %llu ms (the NNG "
                "1.5.2 IPC listener wedge); listened again on the same path, connections "
                "already made are kept",
                o->what, o->url, IPC_HEAL_TIMEOUT_USEC / 1000);
    heal->failing = false;
}

static void start_probe(ipc_heal *heal)
{
    atomic_store(&heal->probe_seen, false);
    int rv = heal->options.open_probe(&heal->probe);
    if (rv != 0)
        return; /* out of resources: the next period tries again */
    /* Non-blocking: the connect and the header exchange run on NNG's
     * threads, and a refused connect is retried there until the judgement. */
    rv = nng_dial(heal->probe, heal->options.url, NULL, NNG_FLAG_NONBLOCK);
    if (rv != 0) {
        nng_close(heal->probe);
        return;
    }
    heal->probing = true;
}

static void stop_probe(ipc_heal *heal)
{
    if (!heal->probing)
        return;
    nng_close(heal->probe);
    heal->probing = false;
}

static int on_timer(sd_event_source *source, uint64_t usec, void *userdata)
{
    ipc_heal *heal = userdata;
    uint64_t next;
    if (heal->probing) {
        bool seen = atomic_load(&heal->probe_seen);
        stop_probe(heal);
        if (!seen || !heal->listening)
            listen_again(heal);
        next = IPC_HEAL_PERIOD_USEC - IPC_HEAL_TIMEOUT_USEC;
    } else {
        start_probe(heal);
        next = heal->probing ? IPC_HEAL_TIMEOUT_USEC : IPC_HEAL_PERIOD_USEC;
    }
    sd_event_source_set_time_relative(source, next);
    sd_event_source_set_enabled(source, SD_EVENT_ONESHOT);
    return 0;
}

int ipc_heal_listen(ipc_heal *heal, sd_event *event, act_error *err)
{
    int r = listen_once(heal, err);
    if (r < 0 || !event)
        return r;
    r = sd_event_add_time_relative(event, &heal->timer, CLOCK_MONOTONIC, IPC_HEAL_PERIOD_USEC,
                                   TIMER_ACCURACY_USEC, on_timer, heal);
    if (r < 0)
        return act_error_set(err, -r, "%s=%s: arming the listener probe: %s", heal->options.what,
                             heal->options.url, strerror(-r));
    return 0;
}

bool ipc_heal_note_pipe(ipc_heal *heal, nng_pipe pipe)
{
    uint64_t pid;
    if (!heal || nng_pipe_get_uint64(pipe, NNG_OPT_IPC_PEER_PID, &pid) != 0 ||
        pid != (uint64_t)heal->pid)
        return false;
    atomic_store(&heal->probe_seen, true);
    return true;
}

void ipc_heal_free(ipc_heal *heal)
{
    if (!heal)
        return;
    sd_event_source_disable_unref(heal->timer);
    stop_probe(heal);
    free(heal);
}

unsigned ipc_heal_count(const ipc_heal *heal)
{
    return heal ? heal->relistens : 0;
}
