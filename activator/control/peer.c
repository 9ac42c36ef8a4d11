#include "activator/control/peer.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/posix_acl.h>
#include <linux/posix_acl_xattr.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fileio.h"

void ctrl_peer_judge_local(const ctrl_access *access, uid_t uid, gid_t gid, bool held_control,
                           bool held_viewer, ctrl_peer *out)
{
    *out = (ctrl_peer){.kind = CTRL_PEER_LOCAL, .uid = uid};
    bool control = access->control_group && (held_control || gid == access->control_gid);
    bool viewer = access->viewer_group && (held_viewer || gid == access->viewer_gid);
    if (uid == 0) {
        out->role = CTRL_ROLE_ROOT;
        snprintf(out->grant, sizeof(out->grant), "uid 0");
    } else if (control) {
        out->role = CTRL_ROLE_OPERATOR;
        snprintf(out->grant, sizeof(out->grant), "ControlGroup=%s", access->control_group);
    } else if (viewer) {
        out->role = CTRL_ROLE_VIEWER;
        snprintf(out->grant, sizeof(out->grant), "ViewerGroup=%s", access->viewer_group);
    } else {
        return;
    }
    out->has_role = true;
}

static bool listed(char *const *list, const char *cn)
{
    for (; list && *list; list++)
        if (strcmp(*list, cn) == 0)
            return true;
    return false;
}

void ctrl_peer_judge_cn(const ctrl_access *access, const char *cn, ctrl_peer *out)
{
    *out = (ctrl_peer){.kind = CTRL_PEER_TLS};
    if (!cn || !act_cn_is_valid(cn, strlen(cn)))
        return;
    snprintf(out->cn, sizeof(out->cn), "%s", cn);
    if (listed(access->operators, cn)) {
        out->role = CTRL_ROLE_OPERATOR;
        snprintf(out->grant, sizeof(out->grant), "ControlOperators=");
    } else if (listed(access->viewers, cn)) {
        out->role = CTRL_ROLE_VIEWER;
        snprintf(out->grant, sizeof(out->grant), "ControlViewers=");
    } else {
        return;
    }
    out->has_role = true;
}

/* Whether fd is the accepted end of a unix stream connection at local
 * address path (NULL: any), made by process pid with uid and gid as the
 * kernel recorded them at connect (SO_PEERCRED). */
static bool is_peer_socket(int fd, const char *path, pid_t pid, uid_t uid, gid_t gid)
{
    int value;
    socklen_t len = sizeof(value);
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &value, &len) < 0 || value != AF_UNIX)
        return false;
    len = sizeof(value);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &value, &len) < 0 || value != SOCK_STREAM)
        return false;
    len = sizeof(value);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &value, &len) < 0 || value)
        return false;
    struct ucred cred;
    len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.pid != pid ||
        cred.uid != uid || cred.gid != gid)
        return false;
    if (!path)
        return true;
    struct sockaddr_un local;
    len = sizeof(local);
    if (getsockname(fd, (struct sockaddr *)&local, &len) < 0 || local.sun_family != AF_UNIX ||
        len <= offsetof(struct sockaddr_un, sun_path))
        return false;
    size_t path_len = len - offsetof(struct sockaddr_un, sun_path);
    return strnlen(local.sun_path, path_len) == strlen(path) &&
           memcmp(local.sun_path, path, strlen(path)) == 0;
}

/* Marks in held each gid of wanted among the supplementary groups the
 * kernel recorded for fd's peer at connect (SO_PEERGROUPS). */
static int peer_socket_holds(int fd, const gid_t *wanted, bool *held, size_t n)
{
    socklen_t len = 64 * sizeof(gid_t);
    _cleanup_free_ gid_t *groups = NULL;
    for (;;) {
        gid_t *bigger = realloc(groups, len);
        if (!bigger)
            return -ENOMEM;
        groups = bigger;
        socklen_t size = len;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &size) == 0) {
            len = size;
            break;
        }
        if (errno != ERANGE || size <= len)
            return -errno;
        len = size;
    }
    for (size_t i = 0; i < n; i++) {
        held[i] = false;
        for (size_t g = 0; g < len / sizeof(gid_t); g++)
            held[i] = held[i] || groups[g] == wanted[i];
    }
    return 0;
}

int ctrl_peer_groups_from_sockets(const char *path, pid_t pid, uid_t uid, gid_t gid,
                                  const gid_t *wanted, bool *held, size_t n)
{
    if (n > CTRL_PEER_WANTED_MAX)
        return -EINVAL;
    DIR *dir = opendir("/proc/self/fd");
    if (!dir)
        return -errno;
    bool every[CTRL_PEER_WANTED_MAX];
    for (size_t i = 0; i < n; i++)
        every[i] = true;
    size_t found = 0;
    int r = 0;
    struct dirent *entry;
    while (r == 0 && (entry = readdir(dir))) {
        char *end;
        long number = strtol(entry->d_name, &end, 10);
        int domain;
        socklen_t len = sizeof(domain);
        /* One system call for each of the daemon's many other descriptors
         * (a host's listening sockets, pipes, files): not a socket, or not
         * a unix one, ends here. */
        if (*end || end == entry->d_name || number == dirfd(dir) ||
            getsockopt((int)number, SOL_SOCKET, SO_DOMAIN, &domain, &len) < 0 || domain != AF_UNIX)
            continue;
        /* A copy, so that every check reads one socket even if another
         * thread closes the number and a new socket takes it. */
        _cleanup_close_ int fd = fcntl((int)number, F_DUPFD_CLOEXEC, 0);
        if (fd < 0 || !is_peer_socket(fd, path, pid, uid, gid))
            continue;
        bool these[CTRL_PEER_WANTED_MAX];
        r = peer_socket_holds(fd, wanted, these, n);
        for (size_t i = 0; r == 0 && i < n; i++)
            every[i] = every[i] && these[i];
        found++;
    }
    closedir(dir);
    if (r < 0)
        return r;
    if (!found)
        return -ENOENT;
    for (size_t i = 0; i < n; i++)
        held[i] = every[i];
    return 0;
}

void ctrl_peer_of_ipc_pipe(const ctrl_access *access, nng_pipe pipe, ctrl_peer *out)
{
    uint64_t uid, gid, pid = 0;
    if (nng_pipe_get_uint64(pipe, NNG_OPT_IPC_PEER_UID, &uid) != 0 ||
        nng_pipe_get_uint64(pipe, NNG_OPT_IPC_PEER_GID, &gid) != 0 || uid > UINT32_MAX ||
        gid > UINT32_MAX) {
        *out = (ctrl_peer){.kind = CTRL_PEER_UNKNOWN};
        return;
    }
    gid_t wanted[2] = {access->control_gid, access->viewer_gid};
    bool held[2] = {false, false};
    bool groups_matter = uid != 0 && (access->control_group || access->viewer_group);
    bool unread = false;
    if (groups_matter) {
        nng_sockaddr local;
        const char *path =
            nng_pipe_get_addr(pipe, NNG_OPT_LOCADDR, &local) == 0 && local.s_family == NNG_AF_IPC
                ? local.s_ipc.sa_path
                : NULL;
        if (nng_pipe_get_uint64(pipe, NNG_OPT_IPC_PEER_PID, &pid) != 0 || pid == 0 ||
            pid > INT32_MAX ||
            ctrl_peer_groups_from_sockets(path, (pid_t)pid, (uid_t)uid, (gid_t)gid, wanted, held,
                                          2) < 0) {
            held[0] = held[1] = false;
            unread = true;
        }
    }
    ctrl_peer_judge_local(access, (uid_t)uid, (gid_t)gid, held[0], held[1], out);
    out->groups_unread = unread && !out->has_role;
}

void ctrl_peer_describe(const ctrl_peer *peer, char *buf, size_t size)
{
    switch (peer->kind) {
    case CTRL_PEER_LOCAL:
        snprintf(buf, size, "uid %" PRIu64, peer->uid);
        return;
    case CTRL_PEER_TLS:
        if (peer->cn[0])
            snprintf(buf, size, "the TLS client CN=%s", peer->cn);
        else
            snprintf(buf, size, "a TLS client whose certificate has no CN a list can name");
        return;
    case CTRL_PEER_UNKNOWN:
        break;
    }
    snprintf(buf, size, "a peer whose credentials could not be read");
}

/* "a viewer", "an operator", but "root" (is root, not a root). */
static const char *role_article(ctrl_role role)
{
    return role == CTRL_ROLE_ROOT ? "" : role == CTRL_ROLE_OPERATOR ? "an " : "a ";
}

/* Who has roles at all on the peer's kind of connection, and how to get
 * one. */
static void without_role(const ctrl_access *access, const ctrl_peer *peer, char *buf, size_t size)
{
    if (peer->kind == CTRL_PEER_TLS) {
        if (!peer->cn[0])
            snprintf(buf, size,
                     "ControlOperators= and ControlViewers= name subject CNs of 1 to %d "
                     "printable ASCII characters; issue a certificate with one",
                     ACT_CN_MAX);
        else
            snprintf(buf, size,
                     "its CN is in neither ControlOperators= (operators) nor ControlViewers= "
                     "(viewers); add it to one of them in activatord.conf");
        return;
    }
    if (peer->kind == CTRL_PEER_UNKNOWN) {
        snprintf(buf, size,
                 "connect over the local socket as root or a member of ControlGroup= or "
                 "ViewerGroup=, or over ControlListen= with a listed client certificate");
        return;
    }
    const char *unread = peer->groups_unread
                             ? " (its supplementary groups could not be read: its connection "
                               "was gone before it was judged)"
                             : "";
    if (access->control_group && access->viewer_group)
        snprintf(buf, size,
                 "only root, members of ControlGroup=%s (operators) and of ViewerGroup=%s "
                 "(viewers) have one%s; ask an administrator to add the user to one of them",
                 access->control_group, access->viewer_group, unread);
    else if (access->control_group || access->viewer_group)
        snprintf(buf, size,
                 "only root and members of %s=%s (%s) have one%s; ask an administrator to add "
                 "the user to that group",
                 access->control_group ? "ControlGroup" : "ViewerGroup",
                 access->control_group ? access->control_group : access->viewer_group,
                 access->control_group ? "operators" : "viewers", unread);
    else
        snprintf(buf, size,
                 "only root has one (neither ControlGroup= nor ViewerGroup= is set); run it as "
                 "root or set ControlGroup= or ViewerGroup=");
}

void ctrl_peer_refusal(const ctrl_access *access, const ctrl_peer *peer, const ctrl_op_spec *op,
                       char *buf, size_t size)
{
    char who[ACT_CN_MAX + 64], needs[160];
    ctrl_peer_describe(peer, who, sizeof(who));
    needs[0] = '\0';
    if (op && op->role == CTRL_ROLE_ROOT)
        snprintf(needs, sizeof(needs),
                 "op %s needs the root role (activatord acts on what it names with its own "
                 "privileges, so only root may %s); ",
                 op->name, op->name);
    else if (op)
        snprintf(needs, sizeof(needs), "op %s needs the %s role; ", op->name,
                 ctrl_role_name(op->role));

    if (!peer->has_role) {
        char how[512];
        without_role(access, peer, how, sizeof(how));
        snprintf(buf, size, "%sthis peer (%s) has no role here: %s", needs, who, how);
        return;
    }
    char hint[160] = "";
    if (op && op->role == CTRL_ROLE_ROOT)
        snprintf(hint, sizeof(hint), "; run it %s",
                 peer->kind == CTRL_PEER_TLS ? "on the box as root"
                                             : "as root ('sudo activatorctl ...')");
    else if (op && peer->kind == CTRL_PEER_TLS)
        snprintf(hint, sizeof(hint), "; operators are the CNs in ControlOperators=");
    else if (op && access->control_group)
        snprintf(hint, sizeof(hint), "; operators are root and the members of ControlGroup=%s",
                 access->control_group);
    else if (op)
        snprintf(hint, sizeof(hint), "; operators are root (ControlGroup= is not set)");
    snprintf(buf, size, "%sthis peer (%s) is %s%s (%s)%s", needs, who, role_article(peer->role),
             ctrl_role_name(peer->role), peer->grant, hint);
}

int ctrl_ipc_socket_mode(int configured, const ctrl_access *access)
{
    if (configured)
        return configured;
    return access->control_group || access->viewer_group ? 0660 : 0600;
}

static void acl_entry(struct posix_acl_xattr_entry *entry, int tag, int perm, uint32_t id)
{
    entry->e_tag = htole16((uint16_t)tag);
    entry->e_perm = htole16((uint16_t)perm);
    entry->e_id = htole32(id);
}

/* Gives group the same access to path as its owning group, through a POSIX
 * ACL (what setfacl -m g:GROUP:rw would write), keeping the mode's bits. */
static int add_group_acl(const char *path, gid_t group, act_error *err)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return act_error_set(err, errno, "%s: %s", path, strerror(errno));
    int user = (st.st_mode >> 6) & 7, owners = (st.st_mode >> 3) & 7, other = st.st_mode & 7;
    struct {
        struct posix_acl_xattr_header header;
        struct posix_acl_xattr_entry entries[5];
    } acl;
    acl.header.a_version = htole32(POSIX_ACL_XATTR_VERSION);
    /* In the order the kernel requires: by tag, then by id. */
    acl_entry(&acl.entries[0], ACL_USER_OBJ, user, (uint32_t)ACL_UNDEFINED_ID);
    acl_entry(&acl.entries[1], ACL_GROUP_OBJ, owners, (uint32_t)ACL_UNDEFINED_ID);
    acl_entry(&acl.entries[2], ACL_GROUP, owners, group);
    acl_entry(&acl.entries[3], ACL_MASK, owners, (uint32_t)ACL_UNDEFINED_ID);
    acl_entry(&acl.entries[4], ACL_OTHER, other, (uint32_t)ACL_UNDEFINED_ID);
    if (setxattr(path, "system.posix_acl_access", &acl, sizeof(acl), 0) < 0)
        return -errno;
    return 0;
}

int ctrl_ipc_socket_grant(const char *url, const ctrl_access *access, act_error *err)
{
    if (strncmp(url, "ipc://", 6) != 0 || (!access->control_group && !access->viewer_group))
        return 0;
    const char *path = url + 6;
    bool control = access->control_group != NULL;
    gid_t owner = control ? access->control_gid : access->viewer_gid;
    if (chown(path, (uid_t)-1, owner) < 0)
        return act_error_set(err, errno, "%s: cannot hand the socket to %s=%s (gid %u): %s", url,
                             control ? "ControlGroup" : "ViewerGroup",
                             control ? access->control_group : access->viewer_group,
                             (unsigned)owner, strerror(errno));
    if (!control || !access->viewer_group)
        return 0;
    int r = add_group_acl(path, access->viewer_gid, err);
    if (r == -EOPNOTSUPP)
        return act_error_set(err, EOPNOTSUPP,
                             "%s: ViewerGroup=%s cannot be let in beside ControlGroup=%s: the "
                             "file system of the socket has no POSIX ACLs; put it on a tmpfs "
                             "such as /run (RuntimeDirectory=)",
                             url, access->viewer_group, access->control_group);
    if (r < 0)
        return act_error_set(err, -r, "%s: cannot let ViewerGroup=%s (gid %u) connect: %s", url,
                             access->viewer_group, (unsigned)access->viewer_gid, strerror(-r));
    return 0;
}
