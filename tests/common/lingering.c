/* A socket whose close lingers (lingering.h). */
#include "tests/common/lingering.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>

#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int lingering_socket(int linger_sec, int *listener)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int small = 4096;
    /* The peer's window small (inherited from the listener), so that what
     * we send fills it and our send queue keeps the rest unsent. */
    if (l < 0 || c < 0 || setsockopt(l, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)) < 0 ||
        bind(l, (struct sockaddr *)&a, len) < 0 || listen(l, 1) < 0 ||
        getsockname(l, (struct sockaddr *)&a, &len) < 0 ||
        setsockopt(c, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)) < 0 ||
        connect(c, (struct sockaddr *)&a, len) < 0)
        goto fail;
    /* The peer, accepted and never read: its window closes. */
    int peer = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    if (peer < 0)
        goto fail;
    close(l);
    l = peer;
    /* Until the peer's window and our send buffer are full: what is left
     * can only go once the peer reads, which it never does. */
    fcntl(c, F_SETFL, fcntl(c, F_GETFL) | O_NONBLOCK);
    static char block[65536];
    unsigned full = 0;
    while (full < 3) {
        if (send(c, block, sizeof(block), MSG_NOSIGNAL) > 0)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            goto fail;
        /* Full for now; the peer's stack may still take some: again, until
         * it has taken all it will. A poll, not a wait for speed. */
        full++;
        usleep(20 * 1000);
    }
    struct linger lg = {.l_onoff = 1, .l_linger = linger_sec};
    if (setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) < 0)
        goto fail;
    *listener = l;
    return c;
fail:;
    int saved = errno;
    if (l >= 0)
        close(l);
    if (c >= 0)
        close(c);
    errno = saved;
    return -1;
}
