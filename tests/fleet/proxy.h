/* A TCP proxy of one box's own between it and the fleet's etcd, so a test
 * can cut that box off alone: while cut, every byte either way is dropped
 * (a partition, not a refusal: the box's calls time out), and connections
 * are still accepted and held; a heal closes every connection it held, so
 * the box connects afresh, and forwards again. One thread of its own. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#define FL_PROXY_PAIRS_MAX 64

typedef struct fl_proxy_pair {
    int down; /* the box's connection */
    int up;   /* etcd's, -1 for one accepted while cut */
} fl_proxy_pair;

typedef struct fl_proxy {
    int listen_fd;
    int port;
    int upstream_port;
    int wake[2]; /* a cut or heal or stop tells the thread */
    pthread_t thread;
    bool running;
    atomic_bool cut;
    atomic_bool stop;
    atomic_uint heals; /* heals asked for; the thread closes what it held at each */
    unsigned healed;   /* the thread's: heals done */
    fl_proxy_pair pairs[FL_PROXY_PAIRS_MAX];
    size_t n_pairs;
} fl_proxy;

/* Listens on a free port of 127.0.0.1, forwarding to 127.0.0.1:upstream_port. */
void fl_proxy_start(fl_proxy *proxy, int upstream_port);
void fl_proxy_cut(fl_proxy *proxy);
void fl_proxy_heal(fl_proxy *proxy);
void fl_proxy_stop(fl_proxy *proxy);
