/* The per-generation notify socket.
 *
 * Each generation gets its own NOTIFY_SOCKET, so Type=notify apps run under
 * the activator unchanged. A datagram counts only when the kernel-attested
 * sender pid (SCM_CREDENTIALS) lives in that generation's cgroup: an app of
 * another host, or a stale process of an older generation, cannot mark this
 * one ready. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "common/cleanup.h"
#include "common/error.h"

typedef struct ntf_socket ntf_socket;

/* What one accepted datagram said; fields not present are false/NULL. */
typedef struct ntf_message {
    bool ready;        /* READY=1 */
    bool stopping;     /* STOPPING=1 */
    bool watchdog;     /* WATCHDOG=1 */
    bool watchdog_trigger; /* WATCHDOG=trigger: the app says it failed its own watchdog */
    const char *status; /* STATUS=..., valid during the callback only */
    int32_t sender_pid;
} ntf_message;

typedef void (*ntf_handler)(ntf_socket *notify, const ntf_message *message, void *userdata);

/* Binds a datagram socket at socket_path (the parent directory must exist),
 * mode 0666 because the app may run under another uid; credentials decide
 * what counts, not file permissions. cgroup_path is the generation leaf as it
 * appears in /proc/<pid>/cgroup's "0::" line, e.g. "/activator/hosts/web1/g-7".
 * The handler runs on the loop for each datagram from inside that cgroup. */
int ntf_open(sd_event *loop, const char *socket_path, const char *cgroup_path, ntf_handler handler,
             void *userdata, ntf_socket **out, act_error *err);

/* The value to put in the generation's NOTIFY_SOCKET. */
const char *ntf_socket_path(const ntf_socket *notify);

/* Datagrams refused so far because their sender was outside the cgroup. */
uint64_t ntf_refused_count(const ntf_socket *notify);

/* Stops listening and unlinks the socket file. NULL is fine. */
void ntf_free(ntf_socket *notify);
DEFINE_TRIVIAL_CLEANUP_FUNC(ntf_socket *, ntf_free)

/* Reads pid's cgroup v2 path ("0::" line of /proc/<pid>/cgroup) into out.
 * Exposed for the membership check's tests. */
int ntf_pid_cgroup(int32_t pid, char *out, size_t out_size);
