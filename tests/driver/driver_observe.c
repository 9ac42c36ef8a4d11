/* What callers look at besides the daemon's own answers: an app over HTTP,
 * cgroup leaves, generation records, and other programs' exit codes and
 * output. */
#include "tests/driver/daemon_driver.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"

extern char **environ;

/* GET / over a connection to addr; the body into buf, or a negative errno. */
static int http_get(int family, const struct sockaddr *addr, socklen_t addr_len, char *buf,
                    size_t size)
{
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct timeval timeout = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    static const char request[] = "GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (connect(fd, addr, addr_len) < 0 ||
        send(fd, request, sizeof(request) - 1, MSG_NOSIGNAL) < 0) {
        int r = -errno;
        close(fd);
        return r;
    }
    size_t used = 0;
    ssize_t n = 0;
    while (used < size - 1 && (n = recv(fd, buf + used, size - 1 - used, 0)) > 0)
        used += (size_t)n;
    /* Told apart for whoever reports a failure: no answer within the 5 s
     * (ETIMEDOUT), the connection reset (ECONNRESET), or closed before a
     * whole header came (EPROTO). */
    int recv_errno = n < 0 ? (errno == EAGAIN || errno == EWOULDBLOCK ? ETIMEDOUT : errno) : 0;
    close(fd);
    buf[used] = '\0';
    const char *body = strstr(buf, "\r\n\r\n");
    if (!body)
        return recv_errno ? -recv_errno : -EPROTO;
    body += 4;
    size_t body_len = strlen(body);
    memmove(buf, body, body_len + 1);
    return (int)body_len;
}

int dd_http_get(int port, char *buf, size_t size)
{
    struct sockaddr_in addr = {.sin_family = AF_INET,
                               .sin_port = htons((uint16_t)port),
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    return http_get(AF_INET, (struct sockaddr *)&addr, sizeof(addr), buf, size);
}

int dd_http_get_at(const char *address, int port, char *buf, size_t size)
{
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, address, &addr.sin_addr) != 1)
        return -EINVAL;
    return http_get(AF_INET, (struct sockaddr *)&addr, sizeof(addr), buf, size);
}

int dd_http_get_unix(const char *path, char *buf, size_t size)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(addr.sun_path))
        return -ENAMETOOLONG;
    memcpy(addr.sun_path, path, strlen(path) + 1);
    return http_get(AF_UNIX, (struct sockaddr *)&addr, sizeof(addr), buf, size);
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

size_t dd_host_dir_fds(const dd_daemon *d, const char *host)
{
    char fds[64], wanted[PATH_MAX];
    snprintf(fds, sizeof(fds), "/proc/%d/fd", (int)d->pid);
    snprintf(wanted, sizeof(wanted), "%s/hosts/%s", d->state_dir, host);
    _cleanup_(closedirp) DIR *dir = opendir(fds);
    size_t count = 0;
    struct dirent *entry;
    while (dir && (entry = readdir(dir))) {
        char path[PATH_MAX], target[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", fds, entry->d_name);
        ssize_t n = readlink(path, target, sizeof(target) - 1);
        if (n <= 0)
            continue;
        target[n] = '\0';
        count += strcmp(target, wanted) == 0;
    }
    return count;
}

int dd_copy_file(const char *from, const char *to, mode_t mode, act_error *err)
{
    _cleanup_close_ int in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return act_error_set(err, errno, "open %s: %s", from, strerror(errno));
    _cleanup_close_ int copy = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (copy < 0)
        return act_error_set(err, errno, "create %s: %s", to, strerror(errno));
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof(buf))) > 0)
        if (write(copy, buf, (size_t)n) != n)
            return act_error_set(err, errno ? errno : EIO, "write %s: %s", to, strerror(errno));
    if (n < 0)
        return act_error_set(err, errno, "read %s: %s", from, strerror(errno));
    /* The umask may have taken bits off the mode open() was given. */
    if (fchmod(copy, mode) < 0)
        return act_error_set(err, errno, "chmod %s: %s", to, strerror(errno));
    return 0;
}

/* What a run as another user needs from the build tree, copied where that
 * user can reach it. A checkout may sit under a directory only its owner
 * can enter (mktemp -d makes them 0700): the user could not exec the
 * program there (status 127), nor could LeakSanitizer read the
 * suppressions file LSAN_OPTIONS names when it has leaks to judge. */
typedef struct reachable {
    char dir[32]; /* /tmp/act-run-XXXXXX, 0755 */
    char exec[PATH_MAX];
    char suppressions[PATH_MAX]; /* "" when LSAN_OPTIONS names none */
    char lsan_options[2 * PATH_MAX];
    char **envp; /* environ, with LSAN_OPTIONS naming the copy */
} reachable;

static void remove_reachable(reachable *r)
{
    if (r->exec[0])
        unlink(r->exec);
    if (r->suppressions[0])
        unlink(r->suppressions);
    if (r->dir[0])
        rmdir(r->dir);
    free(r->envp);
}

static int copy_suppressions(reachable *r, act_error *err)
{
    static const char key[] = "suppressions=";
    const char *options = getenv("LSAN_OPTIONS");
    const char *at = options ? strstr(options, key) : NULL;
    if (!at)
        return 0;
    const char *path = at + strlen(key);
    size_t len = strcspn(path, ":");
    char original[PATH_MAX];
    snprintf(original, sizeof(original), "%.*s", (int)len, path);
    snprintf(r->suppressions, sizeof(r->suppressions), "%s/lsan.supp", r->dir);
    int rc = dd_copy_file(original, r->suppressions, 0644, err);
    if (rc < 0)
        return rc;
    snprintf(r->lsan_options, sizeof(r->lsan_options), "LSAN_OPTIONS=%.*s%s%s",
             (int)(path - options), options, r->suppressions, path + len);
    return 0;
}

static int build_envp(reachable *r, act_error *err)
{
    size_t n = 0;
    while (environ[n])
        n++;
    r->envp = calloc(n + 1, sizeof(char *));
    if (!r->envp)
        return act_error_set(err, ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        r->envp[i] = r->lsan_options[0] && strncmp(environ[i], "LSAN_OPTIONS=", 13) == 0
                         ? r->lsan_options
                         : environ[i];
    return 0;
}

static int make_reachable(const char *exec, reachable *r, act_error *err)
{
    memset(r, 0, sizeof(*r));
    snprintf(r->dir, sizeof(r->dir), "/tmp/act-run-XXXXXX");
    if (!mkdtemp(r->dir)) {
        r->dir[0] = '\0';
        return act_error_set(err, errno, "mkdtemp /tmp/act-run-XXXXXX: %s", strerror(errno));
    }
    if (chmod(r->dir, 0755) < 0)
        return act_error_set(err, errno, "chmod %s: %s", r->dir, strerror(errno));
    const char *base = strrchr(exec, '/');
    snprintf(r->exec, sizeof(r->exec), "%s/%s", r->dir, base ? base + 1 : exec);
    int rc = dd_copy_file(exec, r->exec, 0755, err);
    if (rc == 0)
        rc = copy_suppressions(r, err);
    if (rc == 0)
        rc = build_envp(r, err);
    return rc;
}

/* Runs path with argv and envp, as uid/gid with the n groups when uid is not
 * (uid_t)-1. */
static int run_program(const char *path, char *const argv[], char *const envp[], uid_t uid,
                       gid_t gid, const gid_t *groups, size_t n_groups, char *out,
                       size_t out_size)
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
        if (uid != (uid_t)-1 &&
            (setgroups(n_groups, groups) < 0 || setgid(gid) < 0 || setuid(uid) < 0))
            _exit(DD_RUN_SETUP_FAILED);
        execve(path, argv, envp);
        _exit(DD_RUN_EXEC_FAILED);
    }
    close(fds[1]);
    /* Read to the end even past out_size, so the child never blocks on a
     * full pipe; what does not fit is dropped. */
    size_t used = 0;
    char overflow[4096];
    uint64_t deadline = dd_now_ms() + DD_RUN_TIMEOUT_MS;
    bool timed_out = false;
    for (;;) {
        uint64_t now = dd_now_ms();
        struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
        int ready = now < deadline ? poll(&pfd, 1, (int)(deadline - now)) : 0;
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready == 0) {
            timed_out = true;
            break;
        }
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
    /* Its output ended; its exit follows, within the same deadline. */
    int status = 0;
    pid_t waited = 0;
    while (!timed_out && (waited = waitpid(pid, &status, WNOHANG)) == 0) {
        timed_out = dd_now_ms() >= deadline;
        if (!timed_out)
            dd_sleep_ms(5);
    }
    if (timed_out) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        snprintf(out + used, out_size - used, "\n(%s was killed: it ran past %d s)\n", path,
                 DD_RUN_TIMEOUT_MS / 1000);
        return DD_RUN_TIMED_OUT;
    }
    if (waited < 0 || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

int dd_run(char *const argv[], char *out, size_t out_size)
{
    return run_program(argv[0], argv, environ, (uid_t)-1, 0, NULL, 0, out, out_size);
}

int dd_run_as(char *const argv[], uid_t uid, gid_t gid, char *out, size_t out_size)
{
    return dd_run_as_groups(argv, uid, gid, &gid, 1, out, out_size);
}

int dd_run_as_groups(char *const argv[], uid_t uid, gid_t gid, const gid_t *groups,
                     size_t n_groups, char *out, size_t out_size)
{
    if (uid == (uid_t)-1)
        return dd_run(argv, out, out_size);
    reachable r;
    act_error err = {0};
    int status = make_reachable(argv[0], &r, &err);
    if (status < 0)
        snprintf(out, out_size, "cannot copy %s where uid %u can run it: %s", argv[0],
                 (unsigned)uid, err.message);
    else
        status = run_program(r.exec, argv, r.envp, uid, gid, groups, n_groups, out, out_size);
    remove_reachable(&r);
    return status < 0 ? -1 : status;
}
