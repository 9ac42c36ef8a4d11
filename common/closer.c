/* The closer (common/closer.h): one thread, fed fd numbers through a pipe. */
#include "common/closer.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static int queue_write = -1; /* -1: no thread; close in place */
static pthread_once_t started = PTHREAD_ONCE_INIT;

static void *run(void *data)
{
    int queue_read = (int)(long)data;
    for (;;) {
        int fds[64];
        ssize_t n = read(queue_read, fds, sizeof(fds));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return NULL;
        for (size_t i = 0; i < (size_t)n / sizeof(int); i++)
            close(fds[i]);
    }
}

static void start(void)
{
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) < 0)
        return;
    /* The writer never waits: a full queue means closing in place. */
    fcntl(pipefd[1], F_SETFL, O_NONBLOCK);
    pthread_attr_t attr;
    pthread_t thread;
    bool ok = pthread_attr_init(&attr) == 0 &&
              pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0 &&
              pthread_create(&thread, &attr, run, (void *)(long)pipefd[0]) == 0;
    pthread_attr_destroy(&attr);
    if (!ok) {
        close(pipefd[0]);
        close(pipefd[1]);
        return;
    }
    queue_write = pipefd[1];
}

void act_close_later(int fd)
{
    if (fd < 0)
        return;
    pthread_once(&started, start);
    /* One int is far below PIPE_BUF: written whole or not at all. */
    if (queue_write >= 0 && write(queue_write, &fd, sizeof(fd)) == (ssize_t)sizeof(fd))
        return;
    close(fd);
}

void act_close_foreign(int fd)
{
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) {
        struct linger none = {.l_onoff = 1, .l_linger = 0};
        (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &none, sizeof(none));
    }
    act_close_later(fd);
}
