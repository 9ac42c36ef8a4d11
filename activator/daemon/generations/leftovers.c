#include "activator/daemon/generations/leftovers.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "activator/listen/listen.h"
#include "common/closer.h"

/* The most sockets one host has (a host file allows 64 ListenStream=). */
#define LEFTOVER_LISTEN_MAX 64

static int on_leaf_found(const char *host, const char *leaf_name, cg_found_process *procs,
                         size_t n_procs, void *userdata)
{
    ad_leftovers *leftovers = userdata;
    ad_leftover *grown = realloc(leftovers->items, (leftovers->n + 1) * sizeof(*grown));
    if (!grown)
        return -ENOMEM;
    leftovers->items = grown;
    ad_leftover *leftover = &leftovers->items[leftovers->n++];
    *leftover = (ad_leftover){0};
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

int ad_leftovers_scan(ad_daemon *daemon, act_error *err)
{
    assert(daemon && daemon->cgroups);
    daemon->leftovers = calloc(1, sizeof(*daemon->leftovers));
    if (!daemon->leftovers)
        return act_error_set(err, ENOMEM, "out of memory");
    return cg_enumerate(daemon->cgroups, on_leaf_found, daemon->leftovers, err);
}

void ad_leftovers_free(ad_daemon *daemon)
{
    ad_leftovers *leftovers = daemon->leftovers;
    if (!leftovers)
        return;
    for (size_t i = 0; i < leftovers->n; i++) {
        ad_leftover *leftover = &leftovers->items[i];
        for (size_t j = 0; j < leftover->n_procs; j++)
            if (leftover->procs[j].pidfd >= 0)
                close(leftover->procs[j].pidfd);
        free(leftover->procs);
    }
    free(leftovers->items);
    free(leftovers);
    daemon->leftovers = NULL;
}

int ad_leftovers_take_socket(ad_daemon *daemon, const char *host, unsigned index,
                             const lsn_address *address)
{
    assert(daemon && host && address);
    if (!daemon->leftovers)
        return -1;
    /* Without systemd's FD store, the sockets of a host whose generation
     * outlived us are still open in that generation, at fd 3 + index
     * (LISTEN_FDS). pidfd_getfd copies one back, so the host keeps the very
     * socket its clients connect to. A reload may have moved the address
     * to another index since the generation started, so the others are
     * tried after its own. */
    for (size_t i = 0; i < daemon->leftovers->n; i++) {
        ad_leftover *leftover = &daemon->leftovers->items[i];
        if (strcmp(leftover->host, host) != 0 || strncmp(leftover->leaf, "g-", 2) != 0)
            continue;
        for (size_t j = 0; j < leftover->n_procs; j++) {
            for (unsigned k = 0; k <= LEFTOVER_LISTEN_MAX; k++) {
                unsigned at = k == 0 ? index : k - 1;
                if (k > 0 && at == index)
                    continue;
                int fd = (int)syscall(SYS_pidfd_getfd, leftover->procs[j].pidfd,
                                      SD_LISTEN_FDS_START + (int)at, 0);
                if (fd < 0)
                    continue;
                if (lsn_fd_matches(fd, address)) {
                    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
                    return fd;
                }
                /* Not ours: the generation's own, which it may close the
                 * moment after, leaving ours the last close of a socket
                 * that lingers. Closed off the loop. */
                act_close_later(fd);
            }
        }
    }
    return -1;
}
