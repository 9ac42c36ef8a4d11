#include "activator/connections/connections.h"

#include <assert.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"

/* The TCP states in which the app still holds the connection open: a client
 * that sent its last request and waits for the answer is CLOSE_WAIT on our
 * side and is still a client. Once the app has closed its end (FIN_WAIT*,
 * LAST_ACK, CLOSING, TIME_WAIT) it has no more work for that client. */
#define CONNECTED_TCP_STATES                                                                      \
    ((1u << TCP_ESTABLISHED) | (1u << TCP_SYN_RECV) | (1u << TCP_CLOSE_WAIT))

typedef struct dump_match {
    const lsn_address *address;
    uint64_t count;
} dump_match;

static bool same_ip(const lsn_address *address, const struct inet_diag_msg *msg)
{
    if (address->addr.sa.sa_family == AF_INET) {
        uint32_t want = address->addr.in4.sin_addr.s_addr;
        return want == htonl(INADDR_ANY) || want == msg->id.idiag_src[0];
    }
    static const struct in6_addr any = IN6ADDR_ANY_INIT;
    const struct in6_addr *want = &address->addr.in6.sin6_addr;
    return memcmp(want, &any, sizeof(any)) == 0 ||
           memcmp(want, msg->id.idiag_src, sizeof(*want)) == 0;
}

static int count_message(const struct nlmsghdr *header, dump_match *match)
{
    if (header->nlmsg_type == NLMSG_ERROR) {
        const struct nlmsgerr *error = NLMSG_DATA(header);
        return error->error ? error->error : -EIO;
    }
    int family = match->address->addr.sa.sa_family;
    if (family == AF_UNIX) {
        const struct unix_diag_msg *msg = NLMSG_DATA(header);
        int len = (int)(header->nlmsg_len - NLMSG_LENGTH(sizeof(*msg)));
        /* An accepted socket carries the name of the socket it came from. */
        for (const struct rtattr *attr = (const struct rtattr *)(msg + 1); RTA_OK(attr, len);
             attr = RTA_NEXT(attr, len)) {
            const char *path = match->address->addr.un.sun_path;
            size_t payload = (size_t)RTA_PAYLOAD(attr);
            if (attr->rta_type == UNIX_DIAG_NAME &&
                strnlen(RTA_DATA(attr), payload) == strlen(path) &&
                memcmp(RTA_DATA(attr), path, strlen(path)) == 0)
                match->count++;
        }
        return 0;
    }
    const struct inet_diag_msg *msg = NLMSG_DATA(header);
    if (same_ip(match->address, msg))
        match->count++;
    return 0;
}

/* Sends one dump request and counts every answer it brings. */
static int run_dump(const void *request, size_t len, dump_match *match)
{
    _cleanup_close_ int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0)
        return -errno;
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    if (sendto(fd, request, len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
        return -errno;
    for (;;) {
        char buffer[32768] __attribute__((aligned(NLMSG_ALIGNTO)));
        ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        size_t left = (size_t)n;
        for (const struct nlmsghdr *header = (const struct nlmsghdr *)buffer;
             NLMSG_OK(header, left); header = NLMSG_NEXT(header, left)) {
            if (header->nlmsg_type == NLMSG_DONE)
                return 0;
            int r = count_message(header, match);
            if (r < 0)
                return r;
        }
    }
}

static int count_tcp(const lsn_address *address, uint64_t *count)
{
    uint16_t port = ntohs(address->addr.sa.sa_family == AF_INET ? address->addr.in4.sin_port
                                                                : address->addr.in6.sin6_port);
    /* The kernel filters by local port (bytecode: sport >= p && sport <= p),
     * so a box with many sockets answers with only this host's. Reaching the
     * end of the program accepts; jumping 4 bytes past it rejects. */
    struct {
        struct nlmsghdr header;
        struct inet_diag_req_v2 request;
        struct rtattr bytecode_attr;
        struct inet_diag_bc_op bytecode[4];
    } message = {
        .header = {.nlmsg_len = sizeof(message),
                   .nlmsg_type = SOCK_DIAG_BY_FAMILY,
                   .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP},
        .request = {.sdiag_family = (uint8_t)address->addr.sa.sa_family,
                    .sdiag_protocol = IPPROTO_TCP,
                    .idiag_states = CONNECTED_TCP_STATES},
        .bytecode_attr = {.rta_len = RTA_LENGTH(sizeof(message.bytecode)),
                          .rta_type = INET_DIAG_REQ_BYTECODE},
        .bytecode = {{INET_DIAG_BC_S_GE, 8, 20}, {0, 0, port}, {INET_DIAG_BC_S_LE, 8, 12},
                     {0, 0, port}},
    };
    dump_match match = {.address = address};
    int r = run_dump(&message, sizeof(message), &match);
    *count += match.count;
    return r;
}

static int count_unix(const lsn_address *address, uint64_t *count)
{
    struct {
        struct nlmsghdr header;
        struct unix_diag_req request;
    } message = {
        .header = {.nlmsg_len = sizeof(message),
                   .nlmsg_type = SOCK_DIAG_BY_FAMILY,
                   .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP},
        .request = {.sdiag_family = AF_UNIX,
                    .udiag_states = 1u << TCP_ESTABLISHED,
                    .udiag_show = UDIAG_SHOW_NAME},
    };
    dump_match match = {.address = address};
    int r = run_dump(&message, sizeof(message), &match);
    *count += match.count;
    return r;
}

int conn_count(const lsn_address *addresses, size_t n_addresses, uint64_t *count, act_error *err)
{
    assert(addresses || n_addresses == 0);
    assert(count);
    *count = 0;
    for (size_t i = 0; i < n_addresses; i++) {
        int r = addresses[i].addr.sa.sa_family == AF_UNIX ? count_unix(&addresses[i], count)
                                                           : count_tcp(&addresses[i], count);
        if (r < 0) {
            char shown[160];
            lsn_format(&addresses[i], shown, sizeof(shown));
            return act_error_set(err, -r, "cannot count connections on %s through sock_diag: %s",
                                 shown, strerror(-r));
        }
    }
    return 0;
}
