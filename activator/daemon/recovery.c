/* What a previous daemon left behind. The daemon may die at any instant and
 * its generations keep running (KillMode=process, no PDEATHSIG), so at
 * start-up every leaf under our subtree is found first. A generation that
 * was serving, whose record and claim still say it is this box's current
 * admission, is resumed: the new daemon supervises it and its clients never
 * notice the restart. Everything else is retired with proof before the
 * first wake. A host whose old generation cannot be proven stopped refuses
 * wakes (unproven_stop) rather than risk two generations on one state. */
#include "activator/daemon/daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "common/log.h"

#define RECOVERY_KILL_TIMEOUT_USEC (10 * 1000 * 1000ull)

struct act_leftover {
    char host[ACT_NAME_MAX + 1];
    char leaf[ACT_NAME_MAX + 1];
    cg_found_process *procs;
    size_t n_procs;
};

static int on_leaf_found(const char *host, const char *leaf_name, cg_found_process *procs,
                         size_t n_procs, void *userdata)
{
    act_daemon *daemon = userdata;
    act_leftover *grown =
        realloc(daemon->leftovers, (daemon->n_leftovers + 1) * sizeof(*daemon->leftovers));
    if (!grown)
        return -ENOMEM;
    daemon->leftovers = grown;
    act_leftover *leftover = &daemon->leftovers[daemon->n_leftovers++];
    *leftover = (act_leftover){0};
    snprintf(leftover->host, sizeof(leftover->host), "%s", host);
    snprintf(leftover->leaf, sizeof(leftover->leaf), "%s", leaf_name);
    leftover->procs = calloc(n_procs ? n_procs : 1, sizeof(*procs));
    if (!leftover->procs)
        return -ENOMEM;
    for (size_t i = 0; i < n_procs; i++) {
        leftover->procs[i] = procs[i];
        procs[i].pidfd = -1; /* taken */
    }
    leftover->n_procs = n_procs;
    return 0;
}

int act_recovery_scan(act_daemon *daemon, act_error *err)
{
    return cg_enumerate(daemon->cgroups, on_leaf_found, daemon, err);
}

static void free_leftovers(act_daemon *daemon)
{
    for (size_t i = 0; i < daemon->n_leftovers; i++) {
        act_leftover *leftover = &daemon->leftovers[i];
        for (size_t j = 0; j < leftover->n_procs; j++)
            if (leftover->procs[j].pidfd >= 0)
                close(leftover->procs[j].pidfd);
        free(leftover->procs);
    }
    free(daemon->leftovers);
    daemon->leftovers = NULL;
    daemon->n_leftovers = 0;
}

int act_recovery_take_socket(act_daemon *daemon, const char *host, unsigned index,
                             const act_listen_address *address)
{
    /* Without systemd's FD store, the sockets of a host whose generation
     * outlived us are still open in that generation, at fd 3 + index
     * (LISTEN_FDS). pidfd_getfd copies one back, so the host keeps the very
     * socket its clients connect to. */
    for (size_t i = 0; i < daemon->n_leftovers; i++) {
        act_leftover *leftover = &daemon->leftovers[i];
        if (strcmp(leftover->host, host) != 0 || strncmp(leftover->leaf, "g-", 2) != 0)
            continue;
        for (size_t j = 0; j < leftover->n_procs; j++) {
            int fd = (int)syscall(SYS_pidfd_getfd, leftover->procs[j].pidfd,
                                  SD_LISTEN_FDS_START + (int)index, 0);
            if (fd < 0)
                continue;
            if (act_listen_fd_matches(fd, address)) {
                fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
                return fd;
            }
            close(fd);
        }
    }
    return -1;
}

/* A leftover generation may be resumed when it is the one the record and the
 * claim both name as this box's serving admission, and its main process
 * still runs. Anything less certain is retired. */
static bool adoptable(act_daemon_host *host, const act_leftover *leftover,
                      act_generation_record *record, claim *current, int *main_pidfd)
{
    uint64_t number = 0;
    act_error err = {0};
    if (sscanf(leftover->leaf, "g-%" SCNu64, &number) != 1 || host->serving ||
        host->unproven_at_start)
        return false;
    int dirfd = act_host_dir(host, &err);
    if (dirfd < 0 || act_records_read_generation(dirfd, host->config->name, number, record, &err) <
                         0 ||
        record->phase != ACT_GEN_SERVING)
        return false;
    if (claims_read(host->daemon->store, host->config->name, current, &err) != 1 ||
        !claim_owned_by(current, host->daemon->config.box) ||
        current->holder.generation != number || current->holder.session != record->session ||
        strcmp(current->op.phase, "serving") != 0)
        return false;
    for (size_t i = 0; i < leftover->n_procs; i++)
        if (leftover->procs[i].pid == record->pid) {
            *main_pidfd = leftover->procs[i].pidfd;
            return true;
        }
    return false;
}

static void retire_leftover(act_daemon *daemon, act_daemon_host *host, act_leftover *leftover,
                            unsigned *retired, unsigned *unproven)
{
    if (!host)
        act_log(LOG_NOTICE, "cgroup hosts/%s/%s: no host %s is configured; retiring it",
                leftover->host, leftover->leaf, leftover->host);
    else
        act_log_fields(LOG_NOTICE, &(act_log_ctx){.host = leftover->host},
                       "host %s: leaf %s outlived the previous daemon and is not its current "
                       "serving generation; retiring it with proof",
                       leftover->host, leftover->leaf);
    cg_leaf *leaf = NULL;
    act_error err = {0};
    int r = cg_leaf_open(daemon->cgroups, leftover->host, leftover->leaf, &leaf, &err);
    if (r == 0) {
        int pidfd = leftover->n_procs ? leftover->procs[0].pidfd : -1;
        uint64_t grace = host ? host->config->stop_timeout_usec : 0;
        r = cg_retire_blocking(leaf, pidfd, grace, RECOVERY_KILL_TIMEOUT_USEC, &err);
        if (r == 0)
            r = cg_leaf_remove(leaf, &err);
        cg_leaf_free(leaf);
    }
    uint64_t number = 0;
    if (r == 0) {
        (*retired)++;
        if (host && sscanf(leftover->leaf, "g-%" SCNu64, &number) == 1 &&
            act_host_dir(host, NULL) >= 0)
            act_records_remove_generation(host->host_dirfd, number, NULL);
        return;
    }
    act_log(LOG_ERR, "host %s: leaf %s not proven stopped: %s", leftover->host, leftover->leaf,
            err.message);
    (*unproven)++;
    if (host)
        host->unproven_at_start = true;
}

/* Records whose leaf is gone describe generations that are proven gone. */
static void forget_stale_records(act_daemon_host *host)
{
    uint64_t *numbers = NULL;
    size_t count = 0;
    act_error err = {0};
    if (act_host_dir(host, &err) < 0 ||
        act_records_list_generations(host->host_dirfd, &numbers, &count, &err) < 0)
        return;
    for (size_t i = 0; i < count; i++) {
        if (host->serving && host->serving->number == numbers[i])
            continue;
        char leaf_name[32];
        snprintf(leaf_name, sizeof(leaf_name), "g-%" PRIu64, numbers[i]);
        cg_leaf *leaf = NULL;
        if (cg_leaf_open(host->daemon->cgroups, host->config->name, leaf_name, &leaf, &err) ==
            -ENOENT)
            act_records_remove_generation(host->host_dirfd, numbers[i], NULL);
        cg_leaf_free(leaf);
    }
    free(numbers);
}

void act_recover(act_daemon *daemon)
{
    unsigned resumed = 0, retired = 0, unproven = 0;
    /* Newest first, so that of two serving-looking leaves of one host the
     * later admission is the one resumed. */
    for (size_t i = daemon->n_leftovers; i-- > 0;) {
        act_leftover *leftover = &daemon->leftovers[i];
        act_daemon_host *host = act_hosts_find(daemon, leftover->host);
        act_generation_record record;
        claim current;
        int main_pidfd = -1;
        if (host && adoptable(host, leftover, &record, &current, &main_pidfd)) {
            act_error adopt_err = {0};
            if (act_generation_adopt(host, leftover->leaf, &record, &current, main_pidfd,
                                     &adopt_err) == 0) {
                for (size_t j = 0; j < leftover->n_procs; j++)
                    if (leftover->procs[j].pidfd == main_pidfd)
                        leftover->procs[j].pidfd = -1; /* the generation owns it now */
                resumed++;
                continue;
            }
            act_log(LOG_WARNING, "host %s: cannot resume %s: %s", leftover->host, leftover->leaf,
                    adopt_err.message);
        }
        retire_leftover(daemon, host, leftover, &retired, &unproven);
    }
    for (size_t i = 0; i < daemon->n_hosts; i++) {
        act_daemon_host *host = &daemon->hosts[i];
        if (!unproven)
            forget_stale_records(host);
        if (!host->serving)
            act_host_dir_close(host);
    }
    if (daemon->n_leftovers)
        act_log(LOG_NOTICE,
                "recovery: %u generations resumed, %u leftover leaves retired with proof, %u "
                "not proven",
                resumed, retired, unproven);
    free_leftovers(daemon);
}

void act_recovery_discard(act_daemon *daemon)
{
    free_leftovers(daemon);
}
