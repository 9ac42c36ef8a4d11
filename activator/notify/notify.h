/* The per-generation notify socket.
 *
 * Each generation gets its own NOTIFY_SOCKET, so Type=notify apps run under
 * the activator unchanged, and so a datagram is attributed to generation N
 * or N+1 of a swap by the socket it arrives on, never by guessing. Two
 * fences keep everyone else out:
 *   - the file: the socket sits in a directory of the host's own (mode 0700,
 *     owned by the uid the host runs as), so no other user can even connect;
 *   - the sender: a datagram counts only when the kernel-attested sender
 *     (SCM_PIDFD, which pid reuse cannot fool, else SCM_CREDENTIALS' pid)
 *     lives in that generation's cgroup leaf. A stale process of an older
 *     generation, or a helper of another leaf, cannot mark this one ready.
 * A flood costs the flooder: at most a burst of datagrams is read per loop
 * iteration, so the loop goes on serving its other sources in between, and
 * what does not fit waits in the socket's own (bounded) queue; and at most
 * a window's worth is read per window of time, after which the socket is
 * not read until the window ends: the queue fills and the flooder's sends
 * block, so however fast it sends, the daemon spends no more on it. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
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

/* Datagrams read per loop iteration when ntf_options.burst is 0. */
#define NTF_DEFAULT_BURST 16
/* Datagrams read per window when ntf_options.per_window is 0: a thousand a
 * second, far above what an app says (READY=1, a keep-alive a second,
 * STATUS= on changes), far below what a loop of sends makes. Short windows
 * keep each window's worth a short stretch of the loop's time. */
#define NTF_DEFAULT_PER_WINDOW 10
#define NTF_DEFAULT_WINDOW_USEC (10 * 1000)

typedef struct ntf_options {
    /* The host's notify directory: made when missing (its parent must
     * exist and should be root's), then owned by uid:gid with mode 0700
     * whatever it was, so a change of User= follows. */
    const char *directory;
    const char *name; /* the socket's file name in it */
    uid_t uid;
    gid_t gid;
    /* The generation leaf as /proc/<pid>/cgroup's "0::" line shows it, e.g.
     * "/activator/hosts/web1/g-7", and its id (ntf_cgroup_id; 0 when
     * unknown). With the id, a sender's leaf is one ioctl on its pidfd;
     * the path is for kernels without PIDFD_GET_INFO. */
    const char *cgroup_path;
    uint64_t cgroup_id;
    unsigned burst; /* datagrams per loop iteration; 0: NTF_DEFAULT_BURST */
    unsigned per_window;   /* datagrams per window; 0: NTF_DEFAULT_PER_WINDOW */
    uint64_t window_usec;  /* 0: NTF_DEFAULT_WINDOW_USEC */
    const char *label; /* "host web1: generation 7", for the one log line of a refusal */
} ntf_options;

/* Binds the socket as options say. The handler runs on the loop for each
 * datagram from inside the leaf. */
int ntf_open(sd_event *loop, const ntf_options *options, ntf_handler handler, void *userdata,
             ntf_socket **out, act_error *err);

/* The value to put in the generation's NOTIFY_SOCKET. */
const char *ntf_socket_path(const ntf_socket *notify);

/* Datagrams refused so far because their sender was outside the cgroup (or
 * could not be told), or they were too long. The first refusal is logged,
 * the rest only counted: a flood must not become a flood of log lines. */
uint64_t ntf_refused_count(const ntf_socket *notify);
/* Datagrams accepted so far. */
uint64_t ntf_accepted_count(const ntf_socket *notify);

/* Stops listening and unlinks the socket file (the directory stays, for
 * the host's next generation). NULL is fine. */
void ntf_free(ntf_socket *notify);
DEFINE_TRIVIAL_CLEANUP_FUNC(ntf_socket *, ntf_free)

/* Reads pid's cgroup v2 path ("0::" line of /proc/<pid>/cgroup) into out.
 * Exposed for the membership check's tests. */
int ntf_pid_cgroup(int32_t pid, char *out, size_t out_size);

/* The id of the cgroup at absolute path cgroup_dir (what PIDFD_GET_INFO
 * reports of a process in it). */
int ntf_cgroup_id(const char *cgroup_dir, uint64_t *out);

/* Whether this kernel attests senders with SCM_PIDFD (SO_PASSPIDFD). */
bool ntf_kernel_passes_pidfd(void);
