/* HTTP GETs and the ordinary host's prober (http_probe.h). */
#include "http_probe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

int http_get(int port, const char *path, char *buf, size_t size, int timeout_ms)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct timeval timeout = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
        int error = errno;
        close(fd);
        return -error;
    }
    char request[8192 + 64];
    int n = snprintf(request, sizeof(request), "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
    if (n < 0 || (size_t)n >= sizeof(request) || send(fd, request, (size_t)n, MSG_NOSIGNAL) != n) {
        close(fd);
        return -EIO;
    }
    /* Headers and body together; the body starts after the blank line. */
    size_t cap = 512 * 1024;
    char *whole = malloc(cap);
    if (!whole) {
        close(fd);
        return -ENOMEM;
    }
    size_t got = 0;
    for (;;) {
        ssize_t r = read(fd, whole + got, cap - 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int error = errno == EAGAIN ? ETIMEDOUT : errno;
            close(fd);
            free(whole);
            return -error;
        }
        if (r == 0 || got + (size_t)r == cap - 1)
            break;
        got += (size_t)r;
    }
    close(fd);
    whole[got] = '\0';
    char *body = strstr(whole, "\r\n\r\n");
    if (!body || strncmp(whole, "HTTP/1.", 7) != 0 || !strstr(whole, " 200 ")) {
        free(whole);
        return -EPROTO;
    }
    body += 4;
    int len = snprintf(buf, size, "%s", body);
    free(whole);
    return len < 0 ? -EIO : (size_t)len >= size ? (int)size - 1 : len;
}

int http_answer_pid(const char *body)
{
    const char *p = strstr(body, "pid=");
    return p ? atoi(p + 4) : -1;
}

static void *prober_main(void *arg)
{
    http_prober *prober = arg;
    while (!atomic_load(&prober->stop)) {
        char body[512];
        int r = http_get(prober->port, "/", body, sizeof(body), 5000);
        if (r >= 0) {
            atomic_fetch_add(&prober->answered, 1);
        } else if (atomic_fetch_add(&prober->failed, 1) == 0) {
            snprintf(prober->first_failure, sizeof(prober->first_failure), "GET / on port %d: %s",
                     prober->port, strerror(-r));
        }
        struct timespec ts = {.tv_sec = prober->period_ms / 1000,
                              .tv_nsec = (long)(prober->period_ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

int http_prober_start(http_prober *prober, int port, int period_ms)
{
    memset(prober, 0, sizeof(*prober));
    prober->port = port;
    prober->period_ms = period_ms;
    int r = pthread_create(&prober->thread, NULL, prober_main, prober);
    prober->running = r == 0;
    return -r;
}

void http_prober_stop(http_prober *prober)
{
    if (!prober->running)
        return;
    atomic_store(&prober->stop, true);
    pthread_join(prober->thread, NULL);
    prober->running = false;
}
