/* Who may use the control and events sockets, and in which role.
 *
 * The roles are those of the op table (activator/control/ops.h). On the local
 * (ipc) sockets a peer's role comes from the credentials the kernel recorded
 * when it connected: uid 0 is root, a member of ControlGroup= an operator, a
 * member of ViewerGroup= a viewer. Over ControlListen= it comes from the
 * subject CN of the client certificate (verified against TLSClientCA=):
 * ControlOperators= names the operators, ControlViewers= the viewers. Any
 * other peer has no role, and every request it sends is refused.
 *
 * Membership is the peer process's own: its effective gid and the
 * supplementary groups it holds, not the group database (a process that
 * dropped a group does not keep its power, and a user added to a group gets
 * it with the next login, as everywhere else). All of it is what the kernel
 * recorded when the peer connected: its uid, gid and pid (SO_PEERCRED, which
 * NNG 1.5.2 hands over) and its supplementary groups (SO_PEERGROUPS). NNG
 * does not hand over the socket that SO_PEERGROUPS needs, so the socket is
 * found among the daemon's descriptors by its local address and its peer's
 * credentials (ctrl_peer_groups_from_sockets). Nothing is read from
 * /proc/PID: a process that connects, delays its handshake and exits cannot
 * lend the groups of whichever process gets its pid next. A pid that
 * connected twice, or was reused between two connects, has a group only if
 * every one of its connections held it.
 *
 * Both groups can connect to the socket files: ctrl_ipc_socket_grant gives
 * the file to ControlGroup= (or ViewerGroup= alone) with mode 0660, and with
 * both groups adds a POSIX ACL entry for ViewerGroup=. Everyone else gets
 * EACCES from the kernel before the daemon sees them; the role check here
 * still decides every request. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <nng/nng.h>

#include "activator/control/ops.h"
#include "common/error.h"
#include "common/names.h"

/* Who gets which role: the daemon's configuration, resolved. */
typedef struct ctrl_access {
    const char *control_group; /* ControlGroup= as written; NULL: none */
    gid_t control_gid;
    const char *viewer_group; /* ViewerGroup= as written; NULL: none */
    gid_t viewer_gid;
    char *const *operators; /* ControlOperators= CNs, NULL-terminated; NULL: none */
    char *const *viewers;   /* ControlViewers= CNs */
} ctrl_access;

typedef enum ctrl_peer_kind {
    CTRL_PEER_UNKNOWN, /* its credentials could not be read */
    CTRL_PEER_LOCAL,   /* on an ipc socket: uid */
    CTRL_PEER_TLS,     /* on ControlListen=: cn */
} ctrl_peer_kind;

/* One connected peer, as judged when it connected. */
typedef struct ctrl_peer {
    ctrl_peer_kind kind;
    uint64_t uid;              /* LOCAL */
    char cn[ACT_CN_MAX + 1];   /* TLS; "" when the certificate has no CN a list can name */
    bool groups_unread;        /* LOCAL: only the uid and gid counted (see above) */
    bool has_role;
    ctrl_role role;
    char grant[128]; /* what gave the role: "uid 0", "ControlGroup=activator", ... */
} ctrl_peer;

/* The role of a local peer with effective uid and gid that holds the groups
 * of access for which held_control / held_viewer say so. */
void ctrl_peer_judge_local(const ctrl_access *access, uid_t uid, gid_t gid, bool held_control,
                           bool held_viewer, ctrl_peer *out);

/* The role of a TLS client whose certificate has subject CN cn (NULL: none
 * that a list can name). */
void ctrl_peer_judge_cn(const ctrl_access *access, const char *cn, ctrl_peer *out);

#define CTRL_PEER_WANTED_MAX 2

/* For each of the n (at most CTRL_PEER_WANTED_MAX) gids of wanted, whether
 * process pid, with uid and gid, held it when it connected to the unix
 * socket at path (NULL: any): read from the kernel's record of each such
 * connection among this process's descriptors (SO_PEERGROUPS), and held
 * only if every one of them held it. -ENOENT when there is none. Any
 * thread; never the group database. */
int ctrl_peer_groups_from_sockets(const char *path, pid_t pid, uid_t uid, gid_t gid,
                                  const gid_t *wanted, bool *held, size_t n);

/* Judges the peer of an ipc pipe (any thread; never the group database). */
void ctrl_peer_of_ipc_pipe(const ctrl_access *access, nng_pipe pipe, ctrl_peer *out);

/* "uid 1001", "the TLS client CN=ops-1", for messages. */
void ctrl_peer_describe(const ctrl_peer *peer, char *buf, size_t size);

/* The sentence that refuses op (NULL: an op not known yet) to peer: names the
 * op, the role it needs, the peer and its role, and what would grant it. */
void ctrl_peer_refusal(const ctrl_access *access, const ctrl_peer *peer, const ctrl_op_spec *op,
                       char *buf, size_t size);

/* The file mode of an ipc:// socket: what is configured, else 0660 when a
 * group may connect (the ACL and the role check do the rest), else 0600. */
int ctrl_ipc_socket_mode(int configured, const ctrl_access *access);

/* Once an ipc:// socket (url "ipc:///path") listens, lets the groups of
 * access connect: owned by ControlGroup= (else ViewerGroup=), and with both,
 * an ACL entry for ViewerGroup=. Other URLs and no group: nothing to do. */
int ctrl_ipc_socket_grant(const char *url, const ctrl_access *access, act_error *err);
