/* HTTP/1.0 GETs on 127.0.0.1, for the two hosts of the isolation test: the
 * hostile app's requests, and a client that keeps asking the ordinary host
 * all along, so that any moment it stopped serving is counted. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

/* GET path from 127.0.0.1:port within timeout_ms; returns the body's length
 * with the body in buf (NUL-terminated), or a negative errno. */
int http_get(int port, const char *path, char *buf, size_t size, int timeout_ms);

/* The pid an act-testapp or act-hostile answer names ("pid=P"), or -1. */
int http_answer_pid(const char *body);

typedef struct http_prober {
    int port;
    int period_ms;
    pthread_t thread;
    bool running;
    atomic_bool stop;
    atomic_uint answered;
    atomic_uint failed;
    char first_failure[256];
} http_prober;

/* GET / every period_ms until stopped; an answer must come within 5 s. */
int http_prober_start(http_prober *prober, int port, int period_ms);
void http_prober_stop(http_prober *prober);
