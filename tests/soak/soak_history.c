/* What the soak saw of each host lately, so that a break's report says
 * enough to find its cause without a second run: every box's events for
 * the host (from the soak's subscribers), the claim's revisions (as the
 * router read them), the populated leaves on every box (as the sampler
 * read them, on each change), and, at the report, the leaves as they are. */
#include "soak.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"

static void history_add_v(soak *s, soak_history *history, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
static void history_add_v(soak *s, soak_history *history, const char *fmt, va_list ap)
{
    pthread_mutex_lock(&s->history_lock);
    soak_seen *line = &history->lines[history->added++ % SOAK_HISTORY];
    line->at_ms = soak_now_ms();
    vsnprintf(line->what, sizeof(line->what), fmt, ap);
    pthread_mutex_unlock(&s->history_lock);
}

void soak_history_add(soak *s, soak_history *history, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    history_add_v(s, history, fmt, ap);
    va_end(ap);
}

static soak_host *host_named(soak *s, const char *name)
{
    for (size_t i = 0; i < s->n_hosts; i++)
        if (strcmp(s->hosts[i].name, name) == 0)
            return &s->hosts[i];
    return NULL;
}

void soak_history_event(soak *s, size_t box, const dd_event *event)
{
    soak_host *h = host_named(s, event->host);
    if (!h)
        return;
    soak_history_add(s, &h->events[box], "#%" PRIu64 " %s g-%" PRIu64 "%s%s%s%s", event->seq,
                     event->name, event->generation, event->version[0] ? " " : "", event->version,
                     event->reason[0] ? " reason " : "", event->reason);
}

void soak_history_claim(soak *s, soak_host *h, const claim *c)
{
    if (c->revision == h->claim_revision_seen)
        return;
    h->claim_revision_seen = c->revision;
    const char *executor = claim_executor(c);
    soak_history_add(
        s, &h->claims, "revision %" PRIu64 ": holder %s g-%" PRIu64 ", executor %s, op %s phase %s",
        c->revision, c->holder.box[0] ? c->holder.box : "(none)", c->holder.generation,
        executor ? executor : "(none)", claim_op_kind_to_string(c->op.kind), c->op.phase);
}

void soak_history_leaves(soak *s, soak_host *h, size_t box, const char *leaves)
{
    if (strcmp(h->leaves_seen[box], leaves) == 0)
        return;
    snprintf(h->leaves_seen[box], sizeof(h->leaves_seen[box]), "%s", leaves);
    soak_history_add(s, &h->leaves[box], "populated: %s", leaves[0] ? leaves : "none");
}

static void print_history(soak *s, const char *title, const soak_history *history)
{
    pthread_mutex_lock(&s->history_lock);
    printf("    %s:%s\n", title, history->added ? "" : " nothing seen");
    unsigned first = history->added > SOAK_HISTORY ? history->added - SOAK_HISTORY : 0;
    for (unsigned i = first; i < history->added; i++) {
        const soak_seen *line = &history->lines[i % SOAK_HISTORY];
        /* Signed: the warm-up comes before the run's clock starts. */
        printf("      %+.3f s %s\n", ((double)line->at_ms - (double)s->start_ms) / 1000.0,
               line->what);
    }
    pthread_mutex_unlock(&s->history_lock);
}

/* Every leaf of h on box now, with the processes in it. */
static void print_leaves_now(soak *s, const soak_host *h, size_t box)
{
    char path[PATH_MAX + 80];
    snprintf(path, sizeof(path), "%s/hosts/%s", s->fleet.boxes[box].drv.cgroup_path, h->name);
    _cleanup_(closedirp) DIR *dir = opendir(path);
    printf("    leaves now:%s\n", dir ? "" : " none (the host has no cgroup on this box)");
    struct dirent *entry;
    while (dir && (entry = readdir(dir))) {
        if (entry->d_type != DT_DIR || entry->d_name[0] == '.')
            continue;
        char procs_path[2 * PATH_MAX];
        snprintf(procs_path, sizeof(procs_path), "%s/%s/cgroup.procs", path, entry->d_name);
        _cleanup_free_ char *procs = dd_read_text(procs_path);
        for (char *c = procs; c && *c; c++)
            if (*c == '\n')
                *c = ' ';
        printf("      %s: %s\n", entry->d_name, procs && procs[0] ? procs : "empty");
    }
}

/* /proc/net/tcp's states, by number. */
static const char *tcp_state_name(unsigned state)
{
    static const char *const names[] = {"?",          "ESTABLISHED", "SYN_SENT",  "SYN_RECV",
                                        "FIN_WAIT1",  "FIN_WAIT2",   "TIME_WAIT", "CLOSE",
                                        "CLOSE_WAIT", "LAST_ACK",    "LISTEN",    "CLOSING"};
    return state < sizeof(names) / sizeof(names[0]) ? names[state] : "?";
}

/* Which processes hold socket inode (pid and name, a few at most): who can
 * accept from a listener. */
static void socket_holders(unsigned long inode, char *out, size_t size)
{
    char want[64];
    snprintf(want, sizeof(want), "socket:[%lu]", inode);
    out[0] = '\0';
    _cleanup_(closedirp) DIR *proc = opendir("/proc");
    struct dirent *entry;
    unsigned found = 0;
    while (proc && (entry = readdir(proc)) && found < 4) {
        char *end;
        long pid = strtol(entry->d_name, &end, 10);
        if (*end || pid <= 0)
            continue;
        char fd_dir[64];
        snprintf(fd_dir, sizeof(fd_dir), "/proc/%ld/fd", pid);
        _cleanup_(closedirp) DIR *fds = opendir(fd_dir);
        struct dirent *fd;
        while (fds && (fd = readdir(fds))) {
            char path[320], target[64];
            snprintf(path, sizeof(path), "%s/%s", fd_dir, fd->d_name);
            ssize_t n = readlink(path, target, sizeof(target) - 1);
            if (n <= 0)
                continue;
            target[n] = '\0';
            if (strcmp(target, want) != 0)
                continue;
            char comm_path[64];
            snprintf(comm_path, sizeof(comm_path), "/proc/%ld/comm", pid);
            _cleanup_free_ char *comm = dd_read_text(comm_path);
            if (comm)
                comm[strcspn(comm, "\n")] = '\0';
            size_t used = strlen(out);
            snprintf(out + used, size - used, "%s%ld (%s)", used ? ", " : "", pid,
                     comm ? comm : "?");
            found++;
            break;
        }
    }
}

void soak_history_sockets(soak *s, soak_host *h, const char *address, int port)
{
    struct in_addr want;
    if (inet_pton(AF_INET, address, &want) != 1)
        return;
    _cleanup_free_ char *table = dd_read_text("/proc/net/tcp");
    unsigned listed = 0;
    char *saved = NULL;
    for (char *line = table ? strtok_r(table, "\n", &saved) : NULL; line;
         line = strtok_r(NULL, "\n", &saved)) {
        unsigned local_addr, local_port, remote_addr, remote_port, state, uid;
        unsigned long tx, rx, inode;
        if (sscanf(line, " %*u: %8X:%4X %8X:%4X %2X %8lX:%8lX %*s %*s %u %*u %lu", &local_addr,
                   &local_port, &remote_addr, &remote_port, &state, &tx, &rx, &uid, &inode) != 9 ||
            (int)local_port != port || (local_addr != want.s_addr && local_addr != 0))
            continue;
        /* A listener's rx queue is its accept queue; a connection's, the
         * bytes it has not read. */
        char holders[256] = "";
        if (state == 10 /* LISTEN */)
            socket_holders(inode, holders, sizeof(holders));
        soak_history_add(s, &h->sockets,
                         "%s port %d: %s from port %u, rx %lu tx %lu, uid %u, inode %lu%s%s",
                         address, port, tcp_state_name(state), remote_port, rx, tx, uid, inode,
                         holders[0] ? ", held by " : "", holders);
        listed++;
    }
    if (!listed)
        soak_history_add(s, &h->sockets, "%s port %d: no TCP socket at all", address, port);
}

void soak_history_print(soak *s, const soak_host *h)
{
    printf("soak: what the soak saw of host %s lately (times since the faults began):\n", h->name);
    print_history(s, "its claim, as the router read it", &h->claims);
    print_history(s, "the TCP sockets of its port when a request failed", &h->sockets);
    for (size_t b = 0; b < s->n_boxes; b++) {
        printf("  on %s:\n", fl_box_name(b));
        print_history(s, "events", &h->events[b]);
        print_history(s, "leaves, as the sampler read them", &h->leaves[b]);
        print_leaves_now(s, h, b);
    }
    fflush(stdout);
}
