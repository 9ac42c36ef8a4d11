/* Events: what happens to each host, published on an NNG PUB socket.
 *
 * Each message is "<topic> <json>" with topic "host.<host>.<event>", so a
 * subscriber takes one host with the prefix "host.<host>." (NNG subscriptions
 * are prefixes) or everything with "". The JSON is one object:
 *   {"seq":42,"time_usec":1700000000123456,"box":"box-1","event":"ready",
 *    "host":"web1","generation":3,"version":"v2","digest":"ab12...",
 *    "pid":1234,"reason":null}
 * seq counts every published event of this daemon from 1 with no gaps, so a
 * subscriber that sees a gap knows it lost messages (PUB drops for a
 * subscriber that does not keep up, by design: the daemon never waits for
 * one). Unknown values are null. time_usec is wall-clock (CLOCK_REALTIME).
 *
 * Publishing runs on the loop thread and costs one formatted buffer and one
 * non-blocking NNG send. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "activator/control/peer.h"
#include "common/cleanup.h"
#include "common/error.h"

typedef enum ev_event_kind {
    EV_EVENT_WAKING,
    EV_EVENT_ADMITTED,
    EV_EVENT_RESTORING,
    EV_EVENT_EXEC,
    EV_EVENT_READY,
    EV_EVENT_PUBLISHED,
    EV_EVENT_SERVING,
    EV_EVENT_PARKING,
    EV_EVENT_PARKED,
    EV_EVENT_RETIRING,
    EV_EVENT_RETIRED,
    EV_EVENT_FAILED,
    EV_EVENT_REFUSED,
    EV_EVENT_SWAP_STARTED,
    EV_EVENT_SWAP_DONE,
    EV_EVENT_SWAP_FAILED,
    EV_EVENT_CLAIM_CHANGED,
    /* A host's generations are all proven stopped again, after one was not
     * (unproven_stop): it wakes again. */
    EV_EVENT_PROVEN,
    /* A cold wake runs the build that served last instead of a pin that
     * failed: version names it, reason says which pin failed and why. */
    EV_EVENT_PIN_FALLBACK,
    /* A move's phases as the boxes taking part see them: the source starts
     * draining, has its checkpoint, hands over (moving); the target starts
     * its probe; the move is done on the target, or rolled back (reason:
     * why, by whichever box wrote the rollback). */
    EV_EVENT_MOVE_DRAINING,
    EV_EVENT_MOVE_CHECKPOINTED,
    EV_EVENT_MOVE_MOVING,
    EV_EVENT_MOVE_PROBING,
    EV_EVENT_MOVE_DONE,
    EV_EVENT_MOVE_ROLLED_BACK,
    /* The serving generation is frozen (ParkMode=freeze), and thawed again
     * (reason: what thawed it, "connection", "operator", "swap", ...). */
    EV_EVENT_FROZEN,
    EV_EVENT_THAWED,
    /* A stage from a registry is pulling: reason says the layer, the bytes
     * and the rate ("layer 2 of 5: 45.3 of 200.0 MiB, 38.1 MiB/s"), once
     * a second while it lasts. */
    EV_EVENT_STAGE_PROGRESS,
    /* A wake restores a state that another build than the one it runs
     * last ran against: version is the build about to run, reason names
     * both (the claim's state.build_version and build_digest). */
    EV_EVENT_STATE_OTHER_BUILD,
    /* The replica (ExecReplicate='s process) of a generation exited, pid
     * its pid; reason says what follows and how it ended ("restarting:
     * exited with status 1", "stopped: ...", "exhausted: ..."). A
     * retirement's kill is not told. And it runs again: pid the new one. */
    EV_EVENT_REPLICA_EXITED,
    EV_EVENT_REPLICA_RESTARTED,
    /* Self-fencing (Failover=yes): the box could not prove its lease, so
     * the host's generation is frozen and its wakes refused; and it is
     * lifted (reason: thawed, or retired and why). */
    EV_EVENT_FENCED,
    EV_EVENT_UNFENCED,
    /* A failover host taken from a box whose lease expired (reason: from
     * which box, and the checkpoint it starts from and its age). */
    EV_EVENT_TAKEN_OVER,
    EV_EVENT__COUNT,
} ev_event_kind;

/* What one event says. Strings may be NULL (published as null). */
typedef struct ev_event {
    ev_event_kind kind;
    const char *host;    /* required; a valid host name */
    uint64_t generation; /* 0: none */
    const char *version;
    const char *digest;
    pid_t pid; /* 0: none */
    const char *reason; /* a reason code ("ready_timeout") or a sentence */
} ev_event;

typedef struct ev_publisher ev_publisher;

typedef struct ev_options {
    const char *url;       /* Events=, e.g. "ipc:///run/activator/events.ipc" */
    const char *box;       /* this box's id, carried by every event */
    int ipc_permissions;   /* mode of an ipc:// socket file; 0: ctrl_ipc_socket_mode */
    ctrl_access access;    /* who may subscribe; its strings must outlive the publisher */
    int send_buffer; /* messages queued per subscriber; 0 means 1024 */
    /* Probe the listener and heal it (activator/control/ipc_heal.h); the
     * daemon does, tests and benchmarks need not. */
    bool probe_listener;
} ev_options;

/* Binds the PUB socket. A subscriber with any role of the control socket's
 * (activator/control/peer.h: root, ControlGroup=, ViewerGroup=) is admitted;
 * other pipes are closed as they connect. */
int ev_new(const ev_options *options, ev_publisher **out, act_error *err);
void ev_free(ev_publisher *events);
DEFINE_TRIVIAL_CLEANUP_FUNC(ev_publisher *, ev_free)

/* Loop thread. Publishes one event. -EINVAL for a missing or bad host name or
 * kind (nothing is published and no sequence number is used). */
int ev_publish(ev_publisher *events, const ev_event *event);

/* The sequence number of the last published event (0 before the first). */
uint64_t ev_sequence(const ev_publisher *events);

/* "swap.started" for EV_EVENT_SWAP_STARTED; NULL when out of range. */
const char *ev_event_kind_name(ev_event_kind kind);
int ev_event_kind_from_name(const char *name);

/* Writes "host.<host>." (the subscription prefix of one host) into buf. */
int ev_host_prefix(const char *host, char *buf, size_t size);

/* Splits a received message at the first space: the topic is [0, *topic_len)
 * and the JSON starts at *json. -EINVAL when there is no space. */
int ev_split(const char *msg, size_t len, size_t *topic_len, const char **json);
