/* Runs act-testapp and act-notify-echo the way activatord does: a listening
 * socket passed as fd 3 with LISTEN_FDS/LISTEN_PID/LISTEN_FDNAMES, a
 * NOTIFY_SOCKET datagram socket for READY=1, SIGTERM to stop. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/cleanup.h"

static const char *testapp_path, *echo_path;

/* The app a test started and has not stopped yet: a failed assertion leaves
 * the test at once, and an app left running would hold the test's output
 * pipe open, so meson would wait for its timeout instead of reporting the
 * failure. The teardown ends it. (Copies, not the test's app: that lives on
 * the stack the failure left.) */
static pid_t running_pid;
static int running_notify_fd = -1;

typedef struct app {
    pid_t pid;
    int notify_fd;
    char notify_path[108];
    uint16_t port;
} app;

/* A listening TCP socket on a free loopback port. */
static int listen_loopback(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    assert_int_equal(listen(fd, 128), 0);
    socklen_t len = sizeof(addr);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&addr, &len), 0);
    *port = ntohs(addr.sin_port);
    return fd;
}

/* The watchdog a supervisor gives the app: WATCHDOG_USEC (none when 0) and
 * WATCHDOG_PID, the app's own pid unless pid_is_ours is false. */
typedef struct watchdog_env {
    const char *usec;
    bool pid_is_ours;
} watchdog_env;

static void start_app_watched(app *a, const char *path, const char *const *extra_args,
                              const watchdog_env *watchdog)
{
    uint16_t port;
    int listen_fd = listen_loopback(&port);
    a->port = port;
    /* An abstract socket ("@name" to sd_notify): nothing is left on disk
     * even when a failing test never reaches its cleanup. */
    snprintf(a->notify_path, sizeof(a->notify_path), "@act-apps-notify-%d-%ld", getpid(),
             (long)random());
    a->notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    size_t name_len = strlen(a->notify_path);
    memcpy(un.sun_path, a->notify_path, name_len);
    un.sun_path[0] = '\0';
    assert_int_equal(bind(a->notify_fd, (struct sockaddr *)&un,
                          (socklen_t)(offsetof(struct sockaddr_un, sun_path) + name_len)),
                     0);

    const char *argv[16] = {path};
    size_t n = 1;
    for (size_t i = 0; extra_args && extra_args[i] && n < 15; i++)
        argv[n++] = extra_args[i];
    argv[n] = NULL;

    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* Should this test die where no teardown runs (a sanitizer's abort),
         * the app must not outlive it either. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* This test is single-threaded, so setenv after fork is safe here. */
        /* dup2 onto itself keeps close-on-exec set, so fd 3 already being
         * the socket needs the flag cleared instead. */
        if (listen_fd == 3 ? fcntl(3, F_SETFD, 0) < 0 : dup2(listen_fd, 3) < 0)
            _exit(127);
        char pid_text[32];
        snprintf(pid_text, sizeof(pid_text), "%d", getpid());
        setenv("LISTEN_FDS", "1", 1);
        setenv("LISTEN_PID", pid_text, 1);
        setenv("LISTEN_FDNAMES", "web/0", 1);
        setenv("NOTIFY_SOCKET", a->notify_path, 1);
        setenv("ACTIVATOR_GENERATION", "7", 1);
        setenv("ACT_TESTAPP_VERSION", "v-env", 1);
        if (watchdog) {
            setenv("WATCHDOG_USEC", watchdog->usec, 1);
            setenv("WATCHDOG_PID", watchdog->pid_is_ours ? pid_text : "1", 1);
        }
        execv(path, (char *const *)argv);
        _exit(127);
    }
    close(listen_fd);
    a->pid = pid;
    running_pid = pid;
    running_notify_fd = a->notify_fd;
}

static void start_app(app *a, const char *path, const char *const *extra_args)
{
    start_app_watched(a, path, extra_args, NULL);
}

/* Waits for one notify datagram containing want; returns whether it came. */
static bool wait_notify(app *a, const char *want, int timeout_ms)
{
    struct pollfd pfd = {.fd = a->notify_fd, .events = POLLIN};
    while (poll(&pfd, 1, timeout_ms) == 1) {
        char buf[512];
        ssize_t got = recv(a->notify_fd, buf, sizeof(buf) - 1, 0);
        if (got <= 0)
            return false;
        buf[got] = '\0';
        if (strstr(buf, want))
            return true;
    }
    return false;
}

static uint64_t now_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
}

/* Counts the notify datagrams containing want until n of them came or
 * timeout_ms passed; returns how many came. */
static int count_notify_until(app *a, const char *want, int n, int timeout_ms)
{
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    int count = 0;
    struct pollfd pfd = {.fd = a->notify_fd, .events = POLLIN};
    for (uint64_t now = now_ms(); count < n && now < deadline; now = now_ms()) {
        if (poll(&pfd, 1, (int)(deadline - now)) != 1)
            continue;
        char buf[512];
        ssize_t got = recv(a->notify_fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
        if (got > 0) {
            buf[got] = '\0';
            count += strstr(buf, want) != NULL;
        }
    }
    return count;
}

/* How many notify datagrams containing want arrive within window_ms. */
static int count_notify(app *a, const char *want, int window_ms)
{
    return count_notify_until(a, want, INT_MAX, window_ms);
}

/* A connection to 127.0.0.1:port, or -1 when refused. */
static int connect_port(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in addr = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int connect_app(const app *a)
{
    int fd = connect_port(a->port);
    assert_true(fd >= 0);
    return fd;
}

/* Reads until EOF into buf. */
static size_t read_all(int fd, char *buf, size_t size)
{
    size_t got = 0;
    ssize_t r;
    while (got + 1 < size && (r = read(fd, buf + got, size - 1 - got)) > 0)
        got += (size_t)r;
    buf[got] = '\0';
    return got;
}

static void http_get(const app *a, char *reply, size_t size)
{
    int fd = connect_app(a);
    const char *req = "GET / HTTP/1.0\r\nHost: test\r\n\r\n";
    assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
    read_all(fd, reply, size);
    close(fd);
}

/* Polls cond every millisecond for up to timeout_ms; whether it held. */
static bool poll_until(bool (*cond)(const app *a, const void *arg), const app *a, const void *arg,
                       int timeout_ms)
{
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    while (!cond(a, arg)) {
        if (now_ms() >= deadline)
            return false;
        struct timespec pause = {.tv_nsec = 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    return true;
}

/* Whether the app's end of the connection from client port has been
 * accepted and read to the end: in /proc/net/tcp, a socket not accepted yet
 * has inode 0, and rx_queue counts the bytes the app has not read. */
static bool app_read_everything(const app *a, const void *arg)
{
    unsigned client_port = *(const uint16_t *)arg;
    FILE *f = fopen("/proc/net/tcp", "re");
    if (!f)
        return false;
    char line[512];
    bool read_all = false;
    while (fgets(line, sizeof(line), f)) {
        unsigned local_port, remote_port, state, rx_queue;
        unsigned long inode;
        if (sscanf(line, " %*u: %*x:%x %*x:%x %x %*x:%x %*x:%*x %*x %*u %*u %lu", &local_port,
                   &remote_port, &state, &rx_queue, &inode) == 5 &&
            local_port == a->port && remote_port == client_port)
            read_all = inode != 0 && rx_queue == 0;
    }
    fclose(f);
    return read_all;
}

/* Whether the app has taken sig off its pending signals (it reads them
 * from a signalfd): ShdPnd in /proc/<pid>/status no longer has its bit. */
static bool app_took_signal(const app *a, const void *arg)
{
    int sig = *(const int *)arg;
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)a->pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    bool pending = true;
    unsigned long long mask;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "ShdPnd: %llx", &mask) == 1)
            pending = mask & (1ull << (sig - 1));
    fclose(f);
    return !pending;
}

static uint16_t local_port(int fd)
{
    struct sockaddr_in addr;
    socklen_t len = sizeof(addr);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&addr, &len), 0);
    return ntohs(addr.sin_port);
}

static int stop_app(app *a, int sig)
{
    if (sig)
        kill(a->pid, sig);
    int status;
    assert_int_equal(waitpid(a->pid, &status, 0), a->pid);
    close(a->notify_fd);
    running_pid = 0;
    running_notify_fd = -1;
    return status;
}

/* After every test: the app a failed test left running is killed and
 * reaped, so the failure is reported now and the next test starts clean. */
static int end_running_app(void **state)
{
    (void)state;
    if (running_pid > 0) {
        kill(running_pid, SIGKILL);
        while (waitpid(running_pid, NULL, 0) < 0 && errno == EINTR)
            ;
        close(running_notify_fd);
    }
    running_pid = 0;
    running_notify_fd = -1;
    return 0;
}

static void testapp_serves_socket_activation(void **state)
{
    (void)state;
    app a;
    start_app(&a, testapp_path, NULL);
    assert_true(wait_notify(&a, "READY=1", 5000));
    char reply[1024], want[128];
    http_get(&a, reply, sizeof(reply));
    assert_non_null(strstr(reply, "HTTP/1.0 200 OK\r\n"));
    snprintf(want, sizeof(want), "demo version=v-env generation=7 pid=%d\n", a.pid);
    assert_non_null(strstr(reply, want));
    int status = stop_app(&a, SIGTERM);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void testapp_serves_concurrent_clients(void **state)
{
    (void)state;
    app a;
    const char *args[] = {"--version", "v-arg", NULL};
    start_app(&a, testapp_path, args);
    assert_true(wait_notify(&a, "READY=1", 5000));
    /* 50 connections open at once, each sending its request before any is read. */
    int fds[50];
    for (int i = 0; i < 50; i++) {
        fds[i] = connect_app(&a);
        const char *req = "GET / HTTP/1.0\r\n\r\n";
        assert_int_equal(write(fds[i], req, strlen(req)), (ssize_t)strlen(req));
    }
    for (int i = 0; i < 50; i++) {
        char reply[1024];
        read_all(fds[i], reply, sizeof(reply));
        assert_non_null(strstr(reply, "version=v-arg generation=7"));
        close(fds[i]);
    }
    assert_int_equal(WEXITSTATUS(stop_app(&a, SIGTERM)), 0);
}

static void testapp_finishes_in_flight_request_on_sigterm(void **state)
{
    (void)state;
    app a;
    const char *args[] = {"--slow-response-ms", "400", NULL};
    start_app(&a, testapp_path, args);
    assert_true(wait_notify(&a, "READY=1", 5000));
    int fd = connect_app(&a);
    const char *req = "GET / HTTP/1.0\r\n\r\n";
    assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
    /* The app has the request before it is told to stop. */
    uint16_t client_port = local_port(fd);
    assert_true(poll_until(app_read_everything, &a, &client_port, 5000));
    kill(a.pid, SIGTERM);
    assert_true(wait_notify(&a, "STOPPING=1", 5000));
    char reply[1024];
    read_all(fd, reply, sizeof(reply));
    close(fd);
    assert_non_null(strstr(reply, "200 OK"));
    int status = stop_app(&a, 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void testapp_misbehaves_on_request(void **state)
{
    (void)state;
    app a;
    const char *exit_now[] = {"--exit-immediately", "3", NULL};
    start_app(&a, testapp_path, exit_now);
    int status = stop_app(&a, 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 3);

    const char *after_ready[] = {"--exit-after-ready", "4", NULL};
    start_app(&a, testapp_path, after_ready);
    assert_true(wait_notify(&a, "READY=1", 5000));
    status = stop_app(&a, 0);
    assert_int_equal(WEXITSTATUS(status), 4);

    const char *crash[] = {"--crash-after-ms", "100", NULL};
    start_app(&a, testapp_path, crash);
    status = stop_app(&a, 0);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGSEGV);

    /* --never-ready serves but never says READY=1. */
    const char *never[] = {"--never-ready", NULL};
    start_app(&a, testapp_path, never);
    char reply[1024];
    http_get(&a, reply, sizeof(reply));
    assert_non_null(strstr(reply, "200 OK"));
    assert_false(wait_notify(&a, "READY=1", 200));
    assert_int_equal(WEXITSTATUS(stop_app(&a, SIGTERM)), 0);

    /* --ready-delay-ms holds READY=1 back for the delay. */
    const char *delay[] = {"--ready-delay-ms", "300", NULL};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    start_app(&a, testapp_path, delay);
    assert_true(wait_notify(&a, "READY=1", 5000));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long elapsed_ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    assert_true(elapsed_ms >= 300);
    assert_int_equal(WEXITSTATUS(stop_app(&a, SIGTERM)), 0);

    /* --ignore-sigterm outlives SIGTERM; only SIGKILL ends it. */
    const char *stubborn[] = {"--ignore-sigterm", NULL};
    start_app(&a, testapp_path, stubborn);
    assert_true(wait_notify(&a, "READY=1", 5000));
    kill(a.pid, SIGTERM);
    int sigterm = SIGTERM;
    assert_true(poll_until(app_took_signal, &a, &sigterm, 5000));
    http_get(&a, reply, sizeof(reply));
    assert_non_null(strstr(reply, "200 OK"));
    status = stop_app(&a, SIGKILL);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGKILL);
}

/* The watchdog as systemd (and activatord) gives it: keep-alives only when
 * WATCHDOG_PID is the app's own, and only as many as it was told to send. */
static void testapp_keeps_its_watchdog_alive_as_told(void **state)
{
    (void)state;
    app a;
    const char *three[] = {"--watchdog-stop-after", "3", NULL};
    watchdog_env every_300ms = {.usec = "300000", .pid_is_ours = true};
    start_app_watched(&a, testapp_path, three, &every_300ms);
    assert_true(wait_notify(&a, "READY=1", 5000));
    /* One every 100 ms, three of them, then none: the three are waited for
     * as long as this box takes to send them (a fixed second, when it
     * stalled, would count two), and then none may follow. */
    assert_int_equal(count_notify_until(&a, "WATCHDOG=1", 3, 10000), 3);
    assert_int_equal(count_notify(&a, "WATCHDOG=1", 700), 0);
    assert_int_equal(WEXITSTATUS(stop_app(&a, SIGTERM)), 0);

    watchdog_env not_ours = {.usec = "300000", .pid_is_ours = false};
    start_app_watched(&a, testapp_path, NULL, &not_ours);
    assert_true(wait_notify(&a, "READY=1", 5000));
    assert_int_equal(count_notify(&a, "WATCHDOG=1", 400), 0);
    assert_int_equal(WEXITSTATUS(stop_app(&a, SIGTERM)), 0);

    const char *trigger[] = {"--watchdog-trigger-after-ms", "100", NULL};
    start_app_watched(&a, testapp_path, trigger, &every_300ms);
    assert_true(wait_notify(&a, "WATCHDOG=trigger", 5000));
    assert_int_equal(WEXITSTATUS(stop_app(&a, SIGTERM)), 0);
}

/* --stopping-after-ms says STOPPING=1 and stops accepting, but exits only
 * when told to. */
static void testapp_says_stopping_and_waits_for_sigterm(void **state)
{
    (void)state;
    app a;
    const char *stopping[] = {"--stopping-after-ms", "100", NULL};
    start_app(&a, testapp_path, stopping);
    assert_true(wait_notify(&a, "READY=1", 5000));
    assert_true(wait_notify(&a, "STOPPING=1", 5000));
    /* It closed the only listening socket: nobody is there any more. */
    assert_int_equal(connect_port(a.port), -1);
    /* Nor does it exit by itself: a while later it is still there. */
    assert_false(wait_notify(&a, "", 300));
    assert_int_equal(waitpid(a.pid, NULL, WNOHANG), 0);
    int status = stop_app(&a, SIGTERM);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* Each connection to --health-listen is a check that passes; after
 * --health-fail-after of them the socket is gone and checks are refused. */
static void testapp_passes_health_checks_then_fails_them(void **state)
{
    (void)state;
    uint16_t port;
    close(listen_loopback(&port));
    char listen[64];
    snprintf(listen, sizeof(listen), "127.0.0.1:%u", port);
    const char *args[] = {"--health-listen", listen, "--health-fail-after", "2", NULL};
    app a;
    start_app(&a, testapp_path, args);
    assert_true(wait_notify(&a, "READY=1", 5000));
    for (int i = 0; i < 2; i++) {
        int fd = connect_port(port);
        assert_true(fd >= 0);
        /* The app accepts and closes it: the check is counted. */
        char byte;
        assert_int_equal(read(fd, &byte, 1), 0);
        close(fd);
    }
    assert_int_equal(connect_port(port), -1);
    assert_int_equal(WEXITSTATUS(stop_app(&a, SIGTERM)), 0);
}

static void notify_echo_echoes(void **state)
{
    (void)state;
    app a;
    start_app(&a, echo_path, NULL);
    assert_true(wait_notify(&a, "READY=1", 5000));
    int fd = connect_app(&a);
    assert_int_equal(write(fd, "ping\n", 5), 5);
    char buf[16] = {0};
    size_t got = 0;
    while (got < 5) {
        ssize_t r = read(fd, buf + got, sizeof(buf) - 1 - got);
        assert_true(r > 0);
        got += (size_t)r;
    }
    assert_string_equal(buf, "ping\n");
    close(fd);
    int status = stop_app(&a, SIGTERM);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_apps PATH-TO-act-testapp PATH-TO-act-notify-echo\n");
        return 2;
    }
    testapp_path = argv[1];
    echo_path = argv[2];
    srandom((unsigned)getpid());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(testapp_serves_socket_activation, end_running_app),
        cmocka_unit_test_teardown(testapp_serves_concurrent_clients, end_running_app),
        cmocka_unit_test_teardown(testapp_finishes_in_flight_request_on_sigterm, end_running_app),
        cmocka_unit_test_teardown(testapp_misbehaves_on_request, end_running_app),
        cmocka_unit_test_teardown(testapp_keeps_its_watchdog_alive_as_told, end_running_app),
        cmocka_unit_test_teardown(testapp_says_stopping_and_waits_for_sigterm, end_running_app),
        cmocka_unit_test_teardown(testapp_passes_health_checks_then_fails_them, end_running_app),
        cmocka_unit_test_teardown(notify_echo_echoes, end_running_app),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
