/* See bench_daemon.h. */
#include "bench/wake/bench_daemon.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "activator/listen/listen.h"
#include "common/cleanup.h"

int bd_check_can_run(const char *bench)
{
    if (geteuid() != 0) {
        fprintf(stderr,
                "%s: cannot run: it needs root to create cgroups and run activatord (run it as "
                "root, e.g. sudo scripts/bench.sh)\n",
                bench);
        return 77;
    }
    act_error err = {0};
    int r = dd_cgroups_usable("act-bench-probe", &err);
    if (r < 0) {
        fprintf(stderr, "%s: cannot run: %s\n", bench,
                r == -ENOENT ? "no cgroup2 hierarchy on this machine (mount cgroup2)"
                             : err.message);
        return r == -ENOENT ? 77 : 1;
    }
    return 0;
}

const char *bd_base_dir(void)
{
    const char *base = getenv("ACT_BENCH_DIR");
    return base && base[0] == '/' && strlen(base) < 24 ? base : "/tmp";
}

static const char *store_in_use;

void bd_use_store(const char *store_url)
{
    store_in_use = store_url;
}

int bd_setup(dd_daemon *d, const char *label, const char *extra_conf, act_error *err)
{
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "%s/act-bench-%s", bd_base_dir(), label);
    dd_options options = {
        .dir_prefix = prefix,
        .cgroup_name = "act-bench",
        .box = BD_BOX,
        .store_url = store_in_use,
        .extra_conf = extra_conf,
    };
    int r = dd_setup(d, &options, err);
    const char *verbose = getenv("ACT_BENCH_VERBOSE");
    d->verbose = verbose && *verbose;
    d->keep_dir = getenv("ACT_BENCH_KEEP") != NULL;
    /* A session of its own, as systemd starts a service: with the kernel's
     * autogroup scheduling a session shares the CPU as one group, and a
     * daemon in the benchmark's session would compete with its client. */
    d->own_session = true;
    return r;
}

int bd_start_one_host(dd_daemon *d, const char *label, const char *host, const char *exec,
                      int stop_timeout_sec, char *address, size_t size, act_error *err)
{
    int r = bd_set_up_one_host(d, label, host, exec, stop_timeout_sec, address, size, err);
    return r < 0 ? r : dd_start(d, 30000, NULL, err);
}

int bd_set_up_one_host(dd_daemon *d, const char *label, const char *host, const char *exec,
                       int stop_timeout_sec, char *address, size_t size, act_error *err)
{
    int r = bd_setup(d, label, NULL, err);
    if (r < 0)
        return r;
    int port = dd_free_port(err);
    if (port < 0)
        return port;
    snprintf(address, size, "127.0.0.1:%d", port);
    return dd_write_host(d, host, err,
                         "[Host]\n"
                         "Exec=%s\n"
                         "IdleTimeoutSec=0\n"
                         "StopTimeoutSec=%d\n"
                         "ReadyTimeoutSec=10\n"
                         "[Listen]\n"
                         "ListenStream=%s\n",
                         exec, stop_timeout_sec, address);
}

int bd_main(const char *bench, int (*run)(dd_daemon *d, act_error *err))
{
    int can = bd_check_can_run(bench);
    if (can != 0)
        return can;
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    dd_daemon d = {0};
    act_error err = {0}, cleanup_err = {0};
    int r = run(&d, &err);
    if (r < 0) {
        fprintf(stderr, "%s: %s\n", bench, err.message);
        dd_dump_log(&d);
    }
    if (dd_teardown(&d, &cleanup_err) < 0) {
        fprintf(stderr, "%s: cleanup: %s\n", bench, cleanup_err.message);
        r = r < 0 ? r : -EBUSY;
    }
    return r < 0 ? 1 : 0;
}

int bd_raise_nofile(rlim_t want, rlim_t need, act_error *err)
{
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) < 0)
        return act_error_set(err, errno, "getrlimit: %s", strerror(errno));
    if (limit.rlim_max < want) {
        /* Raising the hard limit needs CAP_SYS_RESOURCE, which a container's
         * root may lack: then the hard limit we have must do. */
        struct rlimit wanted = {want, want};
        if (setrlimit(RLIMIT_NOFILE, &wanted) == 0)
            return 0;
    }
    if (limit.rlim_max < need)
        return act_error_set(err, EMFILE,
                             "RLIMIT_NOFILE hard limit is %lu and cannot be raised, but the "
                             "daemon needs %lu fds; raise it (ulimit -Hn, LimitNOFILE=) and rerun",
                             (unsigned long)limit.rlim_max, (unsigned long)need);
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) < 0)
        return act_error_set(err, errno, "setrlimit RLIMIT_NOFILE: %s", strerror(errno));
    return 0;
}

/* ---- measuring ---------------------------------------------------------------- */

int bd_samples_add(bd_samples *samples, double value)
{
    if (samples->n == samples->cap) {
        size_t cap = samples->cap ? samples->cap * 2 : 256;
        double *grown = realloc(samples->values, cap * sizeof(double));
        if (!grown)
            return -ENOMEM;
        samples->values = grown;
        samples->cap = cap;
    }
    samples->values[samples->n++] = value;
    return 0;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bd_samples_quantile(bd_samples *samples, double q)
{
    if (!samples->n)
        return 0;
    qsort(samples->values, samples->n, sizeof(double), compare_double);
    /* Nearest rank: the smallest value with at least q of the samples at or
     * below it, so p99 of 300 samples is the 297th, not an interpolation. */
    size_t rank = (size_t)(q * (double)samples->n + 0.999999);
    if (rank < 1)
        rank = 1;
    if (rank > samples->n)
        rank = samples->n;
    return samples->values[rank - 1];
}

void bd_samples_free(bd_samples *samples)
{
    free(samples->values);
    *samples = (bd_samples){0};
}

int bd_echo_once(const char *address, int timeout_ms, act_error *err)
{
    lsn_address target;
    int r = lsn_parse(address, "echo target", &target, err);
    if (r < 0)
        return r;
    _cleanup_close_ int fd = socket(target.addr.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return act_error_set(err, errno, "socket: %s", strerror(errno));
    if (connect(fd, &target.addr.sa, target.len) < 0)
        return act_error_set(err, errno, "connect %s: %s", address, strerror(errno));
    char byte = 'x';
    if (send(fd, &byte, 1, MSG_NOSIGNAL) != 1)
        return act_error_set(err, errno, "send to %s: %s", address, strerror(errno));
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int ready;
    do
        ready = poll(&pfd, 1, timeout_ms);
    while (ready < 0 && errno == EINTR);
    if (ready <= 0)
        return act_error_set(err, ETIMEDOUT, "%s: no echo within %d ms", address, timeout_ms);
    char back = 0;
    ssize_t got = recv(fd, &back, 1, 0);
    if (got != 1 || back != byte)
        return act_error_set(err, got < 0 ? errno : ECONNRESET, "%s: %s", address,
                             got < 0 ? strerror(errno) : "closed without echoing");
    return 0;
}
