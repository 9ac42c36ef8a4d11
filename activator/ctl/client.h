/* activatorctl's connection to activatord: one REQ socket for the request and,
 * for live progress, one SUB socket on the events socket. Every wait is
 * bounded, and a lost connection ends a wait at once, so the CLI never hangs
 * on a dead daemon. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <json-c/json.h>
#include <nng/nng.h>

enum {
    CTL_EXIT_OK = 0,
    CTL_EXIT_FAILED = 1,      /* refused or failed; the reason is printed */
    CTL_EXIT_USAGE = 2,       /* bad command line */
    CTL_EXIT_UNREACHABLE = 3, /* the daemon (or with --store, the store) could not be
                                 reached or went away */
};

#define CTL_DEFAULT_CONTROL_URL "ipc:///run/activator/control.ipc"

typedef struct ctl_options {
    const char *connect_url; /* --connect */
    const char *events_url;  /* --events; NULL: derived from connect_url */
    const char *tls_cert, *tls_key, *tls_ca; /* --tls-cert/--tls-key/--tls-ca */
    const char *store_url;   /* --store: the fleet ops against the claim store, no daemon */
    const char *store_ca, *store_cert, *store_key; /* --store-ca/--store-cert/--store-key */
    bool json;               /* --json */
    int timeout_sec;         /* --timeout; 0: per command default */
    bool color;              /* stdout is a tty and NO_COLOR is unset */
} ctl_options;

/* Called for each event received while a call waits. */
typedef void (*ctl_event_fn)(json_object *event, void *userdata);

typedef struct ctl_client {
    const ctl_options *options;
    nng_socket req, sub;
    bool req_open, sub_open;
    char events_url[4200];
} ctl_client;

/* The events URL: --events, or events.ipc beside an ipc:// control socket;
 * empty when it cannot be derived (tls+tcp without --events). */
void ctl_events_url(const ctl_options *options, char *buf, size_t size);

/* Connects the REQ socket. Returns CTL_EXIT_OK, or CTL_EXIT_UNREACHABLE after
 * printing the URL tried, why, and a hint. */
int ctl_client_open(ctl_client *client, const ctl_options *options);

/* Subscribes to events starting with prefix ("" for all). Best effort for
 * progress: false (with nothing printed unless required) when the events
 * socket cannot be reached. required: print why, as watch needs it. */
bool ctl_client_subscribe(ctl_client *client, const char *prefix, bool required);

/* Sends request (not consumed) and waits up to timeout_sec for the reply,
 * passing events to on_event meanwhile. Returns CTL_EXIT_OK with *reply set,
 * or CTL_EXIT_UNREACHABLE after printing why. */
int ctl_client_call(ctl_client *client, json_object *request, int timeout_sec,
                    ctl_event_fn on_event, void *userdata, json_object **reply);

/* Waits for events until *stop becomes true (watch). Returns an exit code. */
int ctl_client_watch(ctl_client *client, volatile bool *stop, ctl_event_fn on_event,
                     void *userdata);

void ctl_client_close(ctl_client *client);
