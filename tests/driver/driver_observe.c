/* What callers look at besides the daemon's own answers: an app over HTTP,
 * cgroup leaves, generation records, and other programs' exit codes and
 * output. */
#include "tests/driver/daemon_driver.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

int dd_http_get(int port, char *buf, size_t size)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct timeval timeout = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    struct sockaddr_in addr = {.sin_family = AF_INET,
                               .sin_port = htons((uint16_t)port),
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    static const char request[] = "GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
        send(fd, request, sizeof(request) - 1, MSG_NOSIGNAL) < 0) {
        int r = -errno;
        close(fd);
        return r;
    }
    size_t used = 0;
    ssize_t n;
    while (used < size - 1 && (n = recv(fd, buf + used, size - 1 - used, 0)) > 0)
        used += (size_t)n;
    close(fd);
    buf[used] = '\0';
    const char *body = strstr(buf, "\r\n\r\n");
    if (!body)
        return -EPROTO;
    body += 4;
    size_t body_len = strlen(body);
    memmove(buf, body, body_len + 1);
    return (int)body_len;
}

bool dd_leaf_exists(const dd_daemon *d, const char *host, const char *leaf)
{
    char path[PATH_MAX + 160];
    snprintf(path, sizeof(path), "%s/hosts/%s/%s", d->cgroup_path, host, leaf);
    return access(path, F_OK) == 0;
}

static size_t count_subdirs(const char *path, bool dirs)
{
    DIR *dir = opendir(path);
    if (!dir)
        return 0;
    size_t count = 0;
    struct dirent *entry;
    while ((entry = readdir(dir)))
        if (entry->d_name[0] != '.' && (!dirs || entry->d_type == DT_DIR))
            count++;
    closedir(dir);
    return count;
}

size_t dd_leaf_count(const dd_daemon *d, const char *host)
{
    char path[PATH_MAX + 80];
    snprintf(path, sizeof(path), "%s/hosts/%s", d->cgroup_path, host);
    return count_subdirs(path, true);
}

size_t dd_generation_records(const dd_daemon *d, const char *host)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/hosts/%s/generations", d->state_dir, host);
    return count_subdirs(path, false);
}

int dd_run(char *const argv[], char *out, size_t out_size)
{
    return dd_run_as(argv, (uid_t)-1, 0, out, out_size);
}

int dd_run_as(char *const argv[], uid_t uid, gid_t gid, char *out, size_t out_size)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        /* Only async-signal-safe calls until exec: NNG is not fork-safe. */
        dup2(fds[1], STDOUT_FILENO);
        dup2(fds[1], STDERR_FILENO);
        if (uid != (uid_t)-1) {
            gid_t groups[1] = {gid};
            if (setgroups(1, groups) < 0 || setgid(gid) < 0 || setuid(uid) < 0)
                _exit(120);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    /* Read to the end even past out_size, so the child never blocks on a
     * full pipe; what does not fit is dropped. */
    size_t used = 0;
    char overflow[4096];
    for (;;) {
        bool room = used < out_size - 1;
        ssize_t n = room ? read(fds[0], out + used, out_size - 1 - used)
                         : read(fds[0], overflow, sizeof(overflow));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (room)
            used += (size_t)n;
    }
    out[used] = '\0';
    close(fds[0]);
    int status;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}
