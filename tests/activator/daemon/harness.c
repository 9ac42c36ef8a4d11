/* See harness.h: the CMocka layer over tests/driver/daemon_driver.h, which
 * fails the running test (after printing the daemon's log) where the driver
 * returns an error. */
#include "harness.h"
#include "harness_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"

#ifndef DH_E2E_APP
#error "DH_E2E_APP must name the act-e2e-app executable"
#endif

/* How long the daemon may take to say READY=1, and to exit after SIGTERM.
 * Both are far above what a healthy run needs (well under a second); they
 * only bound a broken one. */
#define START_TIMEOUT_MS 30000
#define STOP_TIMEOUT_MS 30000

void dh_sleep_ms(long ms)
{
    dd_sleep_ms(ms);
}

uint64_t dh_now_ms(void)
{
    return dd_now_ms();
}

char *dh_read_text(const char *path)
{
    return dd_read_text(path);
}

/* ---- can we run ----------------------------------------------------------- */

int dh_check_can_run(const char *suite, dh_store_kind kind)
{
    if (geteuid() != 0) {
        printf("SKIP %s: activatord's end-to-end tests need root to create cgroups and run "
               "apps in them (run the tests as root)\n",
               suite);
        return DH_SKIP;
    }
    act_error err = {0};
    int r = dd_cgroups_usable("act-e2e-probe", &err);
    if (r == -ENOENT) {
        printf("SKIP %s: no cgroup2 hierarchy here: %s\n", suite, err.message);
        return DH_SKIP;
    }
    if (r < 0) {
        printf("FAIL %s: %s\n", suite, err.message);
        return 1;
    }
    if (kind != DH_STORE_DIR && !etcd_harness_available()) {
        printf("SKIP %s: %s is not installed (Debian package etcd-server)\n", suite,
               ETCD_HARNESS_BINARY);
        return DH_SKIP;
    }
    return 0;
}

/* ---- setup and teardown --------------------------------------------------- */

bool dh_make_tls_certs(const char *dir)
{
    char command[PATH_MAX * 2];
    snprintf(command, sizeof(command), "'%s' '%s'", ACT_TLS_CERTS_SCRIPT, dir);
    return system(command) == 0;
}

dh_store_kind dh_store_kind_from(const char *name)
{
    if (name && strcmp(name, "etcd") == 0)
        return DH_STORE_ETCD;
    if (name && strcmp(name, "etcd-tls") == 0)
        return DH_STORE_ETCD_TLS;
    return DH_STORE_DIR;
}

/* The driver's daemon as box, on store_url (NULL: its own dir store), and
 * the test's client of that store. */
static void setup_daemon(dh_daemon *d, const char *box, const claims_store_options *store_options,
                         const char *extra_conf)
{
    act_error err = {0};
    snprintf(d->box, sizeof(d->box), "%s", box);
    dh_watchdog_watch(d, true);
    dd_options options = {
        .dir_prefix = "/tmp/act-e2e",
        .cgroup_name = "act-e2e",
        .box = box,
        .store_url = d->store_url[0] ? d->store_url : NULL,
        .extra_conf = extra_conf,
    };
    if (dd_setup(&d->drv, &options, &err) < 0)
        fail_msg("%s", err.message);
    /* The apps write their markers here, the one place of the test's
     * directory their filesystem view keeps writable (ReadWritePaths=),
     * whatever user they run as. */
    char markers[PATH_MAX];
    snprintf(markers, sizeof(markers), "%s/markers", d->drv.dir);
    if (mkdir(markers, 0777) < 0 || chmod(markers, 0777) < 0)
        fail_msg("mkdir %s: %s", markers, strerror(errno));
    /* The tests read the daemon's log for what it did step by step. */
    d->drv.verbose = true;
    if (!d->store_url[0])
        snprintf(d->store_url, sizeof(d->store_url), "dir://%s/claims", d->drv.state_dir);
    if (claims_store_open(d->store_url, store_options, &d->store, &err) < 0)
        fail_msg("cannot open the claim store %s: %s", d->store_url, err.message);
    dh_write_host(d, DH_BEACON_HOST, "[Host]\nExec=act-e2e-app\n");
}

/* setup_daemon on the store d->store_kind names, d->store_url (or, when
 * that is empty, a dir store of its own): over TLS, the daemon and the
 * test's client both present d->etcd's client certificate. */
static void setup_on_store(dh_daemon *d, const char *box, const char *extra_conf)
{
    _cleanup_free_ char *conf = NULL;
    claims_store_options store_options = {0};
    if (d->store_kind == DH_STORE_ETCD_TLS) {
        store_options = (claims_store_options){.ca_file = d->etcd.ca_file,
                                               .cert_file = d->etcd.cert_file,
                                               .key_file = d->etcd.key_file};
        if (asprintf(&conf, "StoreCA=%s\nStoreCertificate=%s\nStoreKey=%s\n%s",
                     d->etcd.ca_file, d->etcd.cert_file, d->etcd.key_file,
                     extra_conf ? extra_conf : "") < 0)
            fail_msg("out of memory");
        extra_conf = conf;
    }
    setup_daemon(d, box, &store_options, extra_conf);
}

void dh_setup(dh_daemon *d, dh_store_kind kind, const char *extra_conf)
{
    memset(d, 0, sizeof(*d));
    d->store_kind = kind;
    if (kind != DH_STORE_DIR) {
        act_error err = {0};
        int r = kind == DH_STORE_ETCD_TLS ? etcd_harness_start_tls(&d->etcd, &err)
                                          : etcd_harness_start(&d->etcd, &err);
        if (r < 0)
            fail_msg("cannot start etcd: %s", err.message);
        d->etcd_started = true;
        /* A prefix of our own, so nothing else in this etcd can collide. */
        snprintf(d->store_url, sizeof(d->store_url), "%s/e2e-%d", d->etcd.url_prefix,
                 (int)getpid());
    }
    setup_on_store(d, DH_BOX, extra_conf);
}

void dh_setup_box(dh_daemon *d, const char *box, const char *store_url, const char *extra_conf)
{
    memset(d, 0, sizeof(*d));
    d->store_kind = DH_STORE_ETCD;
    snprintf(d->store_url, sizeof(d->store_url), "%s", store_url);
    setup_daemon(d, box, NULL, extra_conf);
}

void dh_setup_beside(dh_daemon *d, const dh_daemon *first, const char *box,
                     const char *extra_conf)
{
    memset(d, 0, sizeof(*d));
    d->store_kind = first->store_kind;
    /* The first one's etcd, which its teardown stops; this one only uses it. */
    d->etcd = first->etcd;
    snprintf(d->store_url, sizeof(d->store_url), "%s", first->store_url);
    setup_on_store(d, box, extra_conf);
}

int dh_teardown(dh_daemon *d)
{
    int result = 0;
    dh_waiting_for("box %s's teardown (its daemon's stop, its cgroups' removal)", d->box);
    free(d->events);
    d->events = NULL;
    claims_store_free(d->store);
    d->store = NULL;
    act_error err = {0};
    if (dd_teardown(&d->drv, &err) < 0) {
        print_error("%s\n", err.message);
        result = -1;
    }
    if (d->etcd_started)
        etcd_harness_destroy(&d->etcd);
    d->etcd_started = false;
    dh_watchdog_watch(d, false);
    return result;
}

/* Longer than any one daemon test takes (the hostile tenant's, the longest,
 * about 75 s), shorter than meson's 180 s for a whole test program: a hang
 * then says where it is instead of being killed with its output cut. */
#define DH_TEST_BUDGET_MS (150 * 1000)

int dh_fixture_setup(void **state)
{
    *state = calloc(1, sizeof(dh_daemon));
    if (!*state)
        return -1;
    dh_watchdog_arm(DH_TEST_BUDGET_MS);
    return 0;
}

int dh_fixture_teardown(void **state)
{
    int r = dh_teardown(*state);
    free(*state);
    dh_watchdog_disarm();
    return r;
}

int dh_two_boxes_setup(void **state)
{
    *state = calloc(1, sizeof(dh_two_boxes));
    return *state ? 0 : -1;
}

int dh_two_boxes_teardown(void **state)
{
    dh_two_boxes *boxes = *state;
    int r = dh_teardown(&boxes->second);
    r |= dh_teardown(&boxes->first);
    free(boxes);
    dh_watchdog_disarm();
    return r;
}

int dh_free_port(void)
{
    act_error err = {0};
    int port = dd_free_port(&err);
    if (port < 0)
        fail_msg("%s", err.message);
    return port;
}

void dh_write_host(dh_daemon *d, const char *host, const char *fmt, ...)
{
    char text[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    act_error err = {0};
    if (dd_write_host(&d->drv, host, &err, "%s", text) < 0)
        fail_msg("%s", err.message);
}

void dh_write_app_host(dh_daemon *d, const char *host, int port, const char *app_args,
                       const char *extra_host_lines)
{
    dh_write_app_host_at(d, host, "127.0.0.1", port, app_args, extra_host_lines);
}

void dh_write_app_host_at(dh_daemon *d, const char *host, const char *address, int port,
                          const char *app_args, const char *extra_host_lines)
{
    char marker[PATH_MAX];
    dh_marker_path(d, host, marker, sizeof(marker));
    const char *extra = extra_host_lines ? extra_host_lines : "";
    /* The app appends to it as the host's own user, which may not create
     * files in the test's directory. */
    int fd = open(marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0 || fchmod(fd, 0666) < 0)
        fail_msg("cannot create %s: %s", marker, strerror(errno));
    close(fd);
    dh_write_host(d, host,
                  "[Host]\n"
                  "Exec=act-e2e-app %s\n"
                  "Environment=E2E_MARKER=%s\n"
                  "ReadWritePaths=%s/markers\n"
                  "%s"
                  "%s"
                  "%s"
                  "[Listen]\n"
                  "ListenStream=%s:%d\n",
                  app_args ? app_args : "", marker, d->drv.dir,
                  strstr(extra, "ReadyTimeoutSec=") ? "" : "ReadyTimeoutSec=5\n",
                  strstr(extra, "StopTimeoutSec=") ? "" : "StopTimeoutSec=1\n", extra, address,
                  port);
}

int dh_add_app_host(dh_daemon *d, const char *host, const char *app_args,
                    const char *extra_host_lines)
{
    int port = dh_free_port();
    dh_write_app_host(d, host, port, app_args, extra_host_lines);
    dh_stage(d, host, "v1", true, NULL);
    return port;
}

int dh_start_with_host(dh_daemon *d, dh_store_kind kind, const char *host, const char *app_args,
                       const char *extra_host_lines)
{
    dh_setup(d, kind, NULL);
    int port = dh_add_app_host(d, host, app_args, extra_host_lines);
    dh_start(d, NULL);
    return port;
}

int dh_listen_loopback(dh_daemon *d, int *port)
{
    int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(addr);
    DH_CHECK(d,
             listener >= 0 && bind(listener, (struct sockaddr *)&addr, sizeof(addr)) == 0 &&
                 listen(listener, 8) == 0 &&
                 getsockname(listener, (struct sockaddr *)&addr, &len) == 0,
             "cannot listen on 127.0.0.1: %s", strerror(errno));
    *port = ntohs(addr.sin_port);
    return listener;
}

uid_t dh_uid_of(dh_daemon *d, pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d", (int)pid);
    struct stat st;
    DH_CHECK(d, stat(path, &st) == 0, "stat %s: %s", path, strerror(errno));
    return st.st_uid;
}

int dh_open_as(uid_t uid, const char *path, int flags)
{
    pid_t child = fork();
    if (child == 0) {
        if (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0)
            _exit(255);
        int fd = open(path, flags | O_CLOEXEC);
        _exit(fd >= 0 ? 0 : errno);
    }
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) < 0 || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

const char *dh_helper_dir(dh_daemon *d)
{
    static __thread char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/helpers", d->drv.dir);
    DH_CHECK(d, (mkdir(dir, 0777) == 0 || errno == EEXIST) && chmod(dir, 01777) == 0,
             "cannot make %s: %s", dir, strerror(errno));
    return dir;
}

const char *dh_helper_dir_line(dh_daemon *d)
{
    static __thread char line[PATH_MAX + 32];
    snprintf(line, sizeof(line), "ReadWritePaths=%s\n", dh_helper_dir(d));
    return line;
}

void dh_stage_file(dh_daemon *d, const char *host, const char *version, const char *source,
                   bool promote, rel_identity *identity)
{
    char releases[PATH_MAX];
    snprintf(releases, sizeof(releases), "%s/releases", d->drv.state_dir);
    rel_store *store = NULL;
    act_error err = {0};
    if (rel_store_open(releases, &store, &err) < 0)
        fail_msg("rel_store_open %s: %s", releases, err.message);
    rel_identity staged;
    int r = rel_stage(store, host, version, source, NULL, &staged, &err);
    if (r == 0 && promote)
        r = rel_promote(store, host, version, &err);
    rel_store_free(store);
    if (r < 0)
        fail_msg("staging %s as %s/%s: %s", source, host, version, err.message);
    if (identity)
        *identity = staged;
}

void dh_stage(dh_daemon *d, const char *host, const char *version, bool promote,
              rel_identity *identity)
{
    dh_stage_file(d, host, version, DH_E2E_APP, promote, identity);
}

void dh_make_image_layout(dh_daemon *d)
{
    char command[3 * PATH_MAX];
    snprintf(command, sizeof(command),
             "cd %s && umoci init --layout img && umoci new --image img:v1 && "
             "umoci unpack --image img:v1 bundle >/dev/null && "
             "cp %s bundle/rootfs/act-e2e-app && mkdir bundle/rootfs/bin && "
             "ln -s /act-e2e-app bundle/rootfs/bin/app && umoci repack --image img:v1 bundle",
             d->drv.dir, DH_E2E_APP);
    DH_CHECK(d, system(command) == 0, "umoci could not make the image: %s", command);
}

void dh_staged_exec_path(dh_daemon *d, const char *host, const char *version, char *out,
                         size_t size)
{
    const char *base = strrchr(DH_E2E_APP, '/');
    snprintf(out, size, "%s/releases/%s/%s/%s", d->drv.state_dir, host, version,
             base ? base + 1 : DH_E2E_APP);
}

/* ---- start and stop ------------------------------------------------------- */

void dh_dump_log(dh_daemon *d)
{
    dd_dump_log(&d->drv);
}

size_t dh_log_count(dh_daemon *d, const char *text)
{
    char *log = dh_read_text(d->drv.log_path);
    size_t n = 0;
    for (const char *at = log; at && (at = strstr(at, text)); at += strlen(text))
        n++;
    free(log);
    return n;
}

bool dh_log_wait_count(dh_daemon *d, const char *text, size_t n, int timeout_ms)
{
    dh_waiting_for("\"%s\" %zu times in box %s's log (up to %d ms)", text, n, d->box, timeout_ms);
    for (int waited = 0; dh_log_count(d, text) < n; waited += 10) {
        if (waited >= timeout_ms)
            return false;
        usleep(10 * 1000); /* polls the log for the line itself */
    }
    return true;
}

bool dh_log_wait(dh_daemon *d, const char *text, int timeout_ms)
{
    dh_waiting_for("\"%s\" in box %s's log (up to %d ms)", text, d->box, timeout_ms);
    return dd_log_wait(&d->drv, text, timeout_ms);
}

void dh_start(dh_daemon *d, const char *const *extra_env)
{
    act_error err = {0};
    dh_waiting_for("box %s's daemon to start and say READY=1 (up to %d s)", d->box,
                   START_TIMEOUT_MS / 1000);
    if (dd_start(&d->drv, START_TIMEOUT_MS, extra_env, &err) < 0) {
        dh_dump_log(d);
        fail_msg("%s", err.message);
    }
    if (!d->drv.events_by_caller)
        dh_events_subscribe(d);
}

void dh_hold_path(dh_daemon *d, const char *name, char *hold, size_t size)
{
    snprintf(hold, size, "%s/%s", d->drv.dir, name);
}

void dh_start_holding(dh_daemon *d, const char *step, const char *hold)
{
    char env[PATH_MAX + 64];
    snprintf(env, sizeof(env), "ACTIVATOR_TEST_HOLD=%s:%s", step, hold);
    const char *const extra_env[] = {env, NULL};
    dh_start(d, extra_env);
}

int dh_start_failing(dh_daemon *d)
{
    act_error err = {0};
    int r = dd_start(&d->drv, START_TIMEOUT_MS, NULL, &err);
    DH_CHECK(d, r != 0, "activatord sent READY=1, but its start was to fail");
    dd_notify_close(&d->drv);
    DH_CHECK(d, r == -ECHILD, "%s", err.message);
    return d->drv.exit_status;
}

int dh_kill(dh_daemon *d)
{
    act_error err = {0};
    dh_waiting_for("box %s's daemon to die of SIGKILL (up to %d s)", d->box,
                   STOP_TIMEOUT_MS / 1000);
    int status = dd_kill(&d->drv, STOP_TIMEOUT_MS, &err);
    if (status == -ESRCH)
        fail_msg("dh_kill: the daemon is not running");
    /* The next daemon numbers its events from 1 again. */
    d->n_events = 0;
    d->mark = 0;
    return status < 0 ? -1 : status;
}

void dh_hand_over(dh_daemon *d)
{
    act_error err = {0};
    dh_waiting_for("box %s's daemon to hand over and exit (up to %d s)", d->box,
                   STOP_TIMEOUT_MS / 1000);
    int status = dd_hand_over(&d->drv, STOP_TIMEOUT_MS, &err);
    d->n_events = 0;
    d->mark = 0;
    if (status != 0) {
        dh_dump_log(d);
        fail_msg("the handover did not end with exit status 0: %d %s", status, err.message);
    }
}

int dh_stop(dh_daemon *d)
{
    act_error err = {0};
    dh_waiting_for("box %s's daemon to stop after SIGTERM (up to %d s)", d->box,
                   STOP_TIMEOUT_MS / 1000);
    int status = dd_stop(&d->drv, STOP_TIMEOUT_MS, &err);
    if (status == -ESRCH)
        fail_msg("dh_stop: the daemon is not running");
    if (status < 0) {
        dh_dump_log(d);
        fail_msg("%s", err.message);
    }
    return status;
}

bool dh_notify_status_wait(dh_daemon *d, const char *text, int timeout_ms, char *last, size_t size)
{
    return dd_notify_status_wait(&d->drv, text, timeout_ms, last, size);
}

unsigned dh_notify_stored_fds(dh_daemon *d, char *names, size_t size)
{
    return dd_notify_stored_fds(&d->drv, names, size);
}

/* Every cgroup directory below the root, relative to it, except "hosts"
 * itself; and whether any holds a process. */
typedef struct tree_walk {
    size_t root_len;
    char leftovers[2048];
    size_t used;
    bool populated;
} tree_walk;

static tree_walk *current_walk;

static int walk_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    tree_walk *walk = current_walk;
    if (flag != FTW_D && flag != FTW_DP)
        return 0;
    char procs[PATH_MAX + 16];
    snprintf(procs, sizeof(procs), "%s/cgroup.procs", path);
    char *text = dh_read_text(procs);
    if (text && text[0])
        walk->populated = true;
    free(text);
    const char *relative = path + walk->root_len;
    if (*relative == '/')
        relative++;
    if (*relative && strcmp(relative, "hosts") != 0 && walk->used < sizeof(walk->leftovers) - 1)
        walk->used += (size_t)snprintf(walk->leftovers + walk->used,
                                       sizeof(walk->leftovers) - walk->used, " %s", relative);
    return 0;
}

bool dh_pid_gone(pid_t pid)
{
    /* The daemon is gone, so its apps were re-parented and are reaped by
     * init; a zombie may linger for an instant. */
    for (int i = 0; i < 250; i++) {
        if (kill(pid, 0) < 0 && errno == ESRCH)
            return true;
        dh_sleep_ms(20);
    }
    return false;
}

bool dh_kill_and_wait_exit(pid_t pid)
{
    /* The pidfd is taken before the signal, so it is this process's exit
     * that is waited for, not another's that reused the pid. */
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0)
        return false;
    bool exited = syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0) == 0;
    struct pollfd pfd = {.fd = pidfd, .events = POLLIN};
    /* Readable once it exited: the same moment its parent's pidfd says so. */
    exited = exited && poll(&pfd, 1, 10000) == 1;
    close(pidfd);
    return exited;
}

static void check_marked_pids_gone(dh_daemon *d)
{
    DIR *dir = opendir(d->drv.dir);
    if (!dir)
        fail_msg("opendir %s: %s", d->drv.dir, strerror(errno));
    struct dirent *entry;
    while ((entry = readdir(dir))) {
        if (strncmp(entry->d_name, "marker-", 7) != 0)
            continue;
        pid_t pids[64];
        size_t n = dh_marker_pids(d, entry->d_name + 7, pids, 64);
        for (size_t i = 0; i < n; i++)
            DH_CHECK(d, dh_pid_gone(pids[i]),
                     "host %s: app pid %d still runs after the daemon exited", entry->d_name + 7,
                     (int)pids[i]);
    }
    closedir(dir);
}

void dh_stop_and_check_clean(dh_daemon *d)
{
    int status = dh_stop(d);
    DH_CHECK(d, status == 0, "activatord exited with status %d after SIGTERM, expected 0", status);
    DH_CHECK(d, d->drv.stopping_seen, "activatord exited without sending STOPPING=1");

    tree_walk walk = {.root_len = strlen(d->drv.cgroup_path)};
    current_walk = &walk;
    nftw(d->drv.cgroup_path, walk_entry, 16, FTW_PHYS);
    current_walk = NULL;
    DH_CHECK(d, !walk.populated, "a process is left in the cgroup subtree %s", d->drv.cgroup_path);
    DH_CHECK(d, walk.used == 0, "cgroups left under %s after a clean stop:%s", d->drv.cgroup_path,
             walk.leftovers);
    check_marked_pids_gone(d);
}
