/* Where a host meets the daemon, under the real daemon with real apps:
 *   - a Ready=exec: probe runs as the host's user, in the generation's leaf,
 *     with the generation's environment;
 *   - the notify socket is the host user's alone (another uid gets EACCES),
 *     a datagram from outside the generation is ignored, counted, and
 *     logged once; a flood of it from inside leaves the daemon answering;
 *   - without journald, a host's output goes through the log keeper into a
 *     file of its own, rotated by size, which the host cannot grow (and
 *     without the keeper, the control, can, at the cost of one bounded
 *     rotation); the output outlives the daemon's death and the keeper's.
 * (The metrics server's connection limits are daemon-metrics'.) */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#ifndef DH_NOTIFY_FLOOD
#error "DH_NOTIFY_FLOOD must name the act-notify-flood executable"
#endif

#define HOST_UID 65534

/* A world-writable temp dir for what the host's user writes. */
static void make_shared_dir(dh_daemon *d, char *out, size_t size)
{
    snprintf(out, size, "/tmp/act-surfaces-XXXXXX");
    DH_CHECK(d, mkdtemp(out), "mkdtemp: %s", strerror(errno));
    chmod(out, 0777);
}

/* The daemon's dirs are 0700; the host's user passes through to its state
 * directory (its working directory). */
static void open_path_to_state(dh_daemon *d)
{
    chmod(d->drv.dir, 0711);
    chmod(d->drv.state_dir, 0711);
    char hosts[PATH_MAX];
    snprintf(hosts, sizeof(hosts), "%s/hosts", d->drv.state_dir);
    mkdir(hosts, 0711);
    chmod(hosts, 0711);
}

static void write_script(dh_daemon *d, const char *path, const char *text)
{
    FILE *f = fopen(path, "we");
    DH_CHECK(d, f, "cannot write %s: %s", path, strerror(errno));
    fputs(text, f);
    fclose(f);
    chmod(path, 0755);
}

/* The probe sees the files its generation sees: the directory it writes
 * to is one of the host's ReadWritePaths=. */
static void test_ready_exec_probe_runs_as_the_host_in_its_leaf(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    open_path_to_state(d);
    char shared[64], script[128], out[160];
    make_shared_dir(d, shared, sizeof(shared));
    snprintf(script, sizeof(script), "%s/probe.sh", shared);
    snprintf(out, sizeof(out), "%s/probe.out", shared);
    write_script(d, script,
                 "#!/bin/sh\n"
                 "{ echo \"uid=$(id -u)\"; echo \"gen=$ACTIVATOR_GENERATION\";\n"
                 "  echo \"env=$PROBE_MARK\"; cat /proc/self/cgroup; } > \"$PROBE_OUT.tmp\"\n"
                 "mv \"$PROBE_OUT.tmp\" \"$PROBE_OUT\"\n");
    int port = dh_free_port();
    dh_write_host(d, "probed",
                  "[Host]\n"
                  "Exec=act-e2e-app\n"
                  "User=%d\n"
                  "Group=%d\n"
                  "Environment=PROBE_OUT=%s PROBE_MARK=from-the-host-file\n"
                  "Ready=exec:%s\n"
                  "ReadWritePaths=%s\n"
                  "ReadyTimeoutSec=10\n"
                  "StopTimeoutSec=1\n"
                  "[Listen]\n"
                  "ListenStream=127.0.0.1:%d\n",
                  HOST_UID, HOST_UID, out, script, shared, port);
    dh_stage(d, "probed", "v1", true, NULL);
    dh_start(d, NULL);
    dh_served served = dh_wake(d, "probed");

    char *text = dh_read_text(out);
    DH_CHECK(d, text, "the probe wrote nothing to %s", out);
    char expected_leaf[64];
    snprintf(expected_leaf, sizeof(expected_leaf), "/hosts/probed/g-%" PRIu64 "\n",
             served.generation);
    char expected_gen[32];
    snprintf(expected_gen, sizeof(expected_gen), "gen=%" PRIu64 "\n", served.generation);
    bool as_host = strstr(text, "uid=65534\n") != NULL;
    bool in_leaf = strstr(text, expected_leaf) != NULL;
    bool with_env = strstr(text, expected_gen) && strstr(text, "env=from-the-host-file\n");
    char copy[2048];
    snprintf(copy, sizeof(copy), "%s", text);
    free(text);
    DH_CHECK(d, as_host, "the probe did not run as uid %d: %s", HOST_UID, copy);
    DH_CHECK(d, in_leaf, "the probe did not run in the leaf %s: %s", expected_leaf, copy);
    DH_CHECK(d, with_env, "the probe did not get the generation's environment: %s", copy);

    dh_stop_and_check_clean(d);
    unlink(out);
    unlink(script);
    rmdir(shared);
}


static size_t count_occurrences(const char *text, const char *needle)
{
    size_t n = 0;
    for (const char *at = text; (at = strstr(at, needle)); at += strlen(needle))
        n++;
    return n;
}

/* errno of a notify datagram to path sent as uid (0: it went through). */
static int send_as(const char *path, uid_t uid)
{
    pid_t child = fork();
    if (child == 0) {
        if (setgroups(0, NULL) < 0 || setgid(uid) < 0 || setuid(uid) < 0)
            _exit(100);
        struct sockaddr_un address = {.sun_family = AF_UNIX};
        snprintf(address.sun_path, sizeof(address.sun_path), "%s", path);
        int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            _exit(101);
        if (sendto(fd, "READY=1", 7, 0, (struct sockaddr *)&address, sizeof(address)) < 0)
            _exit(errno);
        _exit(0);
    }
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

static void test_notify_socket_is_the_hosts_alone(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    open_path_to_state(d);
    int port = dh_free_port();
    dh_write_host(d, "notified",
                  "[Host]\n"
                  "Exec=act-e2e-app\n"
                  "User=%d\n"
                  "Group=%d\n"
                  "Ready=notify\n"
                  "ReadyTimeoutSec=10\n"
                  "StopTimeoutSec=1\n"
                  "[Listen]\n"
                  "ListenStream=127.0.0.1:%d\n",
                  HOST_UID, HOST_UID, port);
    dh_stage(d, "notified", "v1", true, NULL);
    dh_start(d, NULL);
    /* Ready through the socket: the host's user got in. */
    dh_served served = dh_wake(d, "notified");

    char directory[256], socket_path[100];
    snprintf(directory, sizeof(directory), "%s/notify/notified", d->drv.runtime_dir);
    DH_CHECK(d,
             snprintf(socket_path, sizeof(socket_path), "%s/g-%" PRIu64, directory,
                      served.generation) < (int)sizeof(socket_path),
             "the socket's path is too long");
    struct stat st;
    DH_CHECK(d, stat(directory, &st) == 0 && st.st_uid == HOST_UID && (st.st_mode & 0777) == 0700,
             "%s: uid %u mode %o, expected %d and 700", directory, (unsigned)st.st_uid,
             (unsigned)(st.st_mode & 0777), HOST_UID);
    /* Others may pass through the daemon's own directories: only the
     * host's directory keeps them out. */
    chmod(d->drv.runtime_dir, 0711);
    char notify_root[PATH_MAX];
    snprintf(notify_root, sizeof(notify_root), "%s/notify", d->drv.runtime_dir);
    chmod(notify_root, 0755);
    int other = send_as(socket_path, HOST_UID - 1);
    DH_CHECK(d, other == EACCES, "uid %d sending to %s: %s, expected EACCES", HOST_UID - 1,
             socket_path, other > 0 ? strerror(other) : "it went through");

    /* From outside the generation (this test, as root): heard, refused,
     * counted, logged once. WATCHDOG=trigger would retire it if it
     * counted. */
    for (int i = 0; i < 5; i++)
        DH_CHECK(d, send_as(socket_path, 0) == 0, "root cannot send to %s", socket_path);
    int sent = 0;
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    snprintf(address.sun_path, sizeof(address.sun_path), "%s", socket_path);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    for (int i = 0; i < 5; i++)
        sent += sendto(fd, "WATCHDOG=trigger", 16, 0, (struct sockaddr *)&address,
                       sizeof(address)) == 16;
    close(fd);
    DH_CHECK(d, sent == 5, "sent %d of 5 datagrams", sent);
    uint64_t refused = 0;
    for (int i = 0; i < 100 && refused < 10; i++) {
        json_object *status = dh_status(d, "notified");
        refused = dh_json_u64(status, "notify_refused");
        json_object_put(status);
        dd_sleep_ms(20);
    }
    json_object *status = dh_status(d, "notified");
    bool serving = strcmp(dh_json_str(status, "state"), "serving") == 0 &&
                   dh_json_u64(status, "generation") == served.generation;
    json_object_put(status);
    DH_CHECK(d, refused == 10, "status says %" PRIu64 " datagrams refused, expected 10", refused);
    DH_CHECK(d, serving, "the generation did not go on serving after datagrams from outside it");
    char *log = dh_read_text(d->drv.log_path);
    size_t lines = log ? count_occurrences(log, "ignoring a notify datagram") : 0;
    free(log);
    DH_CHECK(d, lines == 1, "the refusals were logged %zu times, expected once", lines);
    dh_stop_and_check_clean(d);
}

/* Runs `status` n times in a row; the latencies in ms, sorted. */
static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* A script of the host's, in a fresh shared dir. */
typedef struct host_script {
    char dir[64];
    char path[128];
} host_script;

typedef enum { SCRIPT_READY_PROBE, SCRIPT_REPLICA } script_role;

/* Adds host with an app and text as its Ready=exec: probe (20 s) or its
 * ExecReplicate=. */
static void add_script_host(dh_daemon *d, const char *host, script_role role, const char *text,
                            host_script *script)
{
    make_shared_dir(d, script->dir, sizeof(script->dir));
    snprintf(script->path, sizeof(script->path), "%s/%s.sh", script->dir, host);
    write_script(d, script->path, text);
    char lines[256];
    if (role == SCRIPT_READY_PROBE)
        snprintf(lines, sizeof(lines), "Ready=exec:%s\nReadyTimeoutSec=20\n", script->path);
    else
        snprintf(lines, sizeof(lines), "ExecReplicate=%s\n", script->path);
    dh_add_app_host(d, host, NULL, lines);
}

static void remove_script(host_script *script)
{
    unlink(script->path);
    rmdir(script->dir);
}

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void time_status(dh_daemon *d, double *ms, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t start = now_us();
        json_object *status = dh_status(d, "calm");
        ms[i] = (double)(now_us() - start) / 1000.0;
        json_object_put(status);
    }
    qsort(ms, n, sizeof(*ms), compare_double);
}

#define STATUS_SAMPLES 200
/* Enough to call it a flood: seconds of what an app says in a day. */
#define FLOOD_UNDER_WAY 1000

/* What the flooder of host flood says it has sent so far (its last report
 * in the host's log), waiting up to timeout_ms for at least at_least. */
static unsigned long long flood_sent(dh_daemon *d, unsigned long long at_least, int timeout_ms)
{
    char output[PATH_MAX];
    snprintf(output, sizeof(output), "%s/hosts/flood/log/output.log", d->drv.state_dir);
    const char *report = "act-notify-flood: sent ";
    unsigned long long sent = 0;
    uint64_t deadline = dd_now_ms() + (uint64_t)timeout_ms;
    do {
        char *text = dh_read_text(output);
        for (const char *at = text; at && (at = strstr(at, report)); at += strlen(report))
            sent = strtoull(at + strlen(report), NULL, 10);
        free(text);
        if (sent >= at_least)
            break;
        dd_sleep_ms(100);
    } while (dd_now_ms() < deadline);
    return sent;
}

static void test_a_notify_flood_leaves_the_daemon_answering(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    /* The host's own process floods its socket beside the app, until the
     * host is parked. */
    dh_add_app_host(d, "flood", NULL, "ExecReplicate=" DH_NOTIFY_FLOOD "\n");
    dh_add_app_host(d, "calm", NULL, NULL);
    dh_start(d, NULL);
    dh_wake(d, "calm");

    static double idle[STATUS_SAMPLES], flooded[STATUS_SAMPLES];
    time_status(d, idle, STATUS_SAMPLES);
    dh_wake(d, "flood");
    /* Measured only once the flood is under way, however long this
     * machine takes to get there. */
    unsigned long long before = flood_sent(d, FLOOD_UNDER_WAY, 60000);
    DH_CHECK(d, before >= FLOOD_UNDER_WAY, "the flooder sent only %llu datagrams in 60 s",
             before);
    time_status(d, flooded, STATUS_SAMPLES);
    /* The other host wakes and parks as ever meanwhile. */
    dh_park(d, "calm");
    dh_wake(d, "calm");
    /* Still flooding once the samples were taken: they were all taken under
     * the flood (it reports every second, so this waits a second or so). */
    unsigned long long after = flood_sent(d, before + 1, 30000);
    double idle_p50 = idle[STATUS_SAMPLES / 2], idle_p99 = idle[STATUS_SAMPLES * 99 / 100];
    double flood_p50 = flooded[STATUS_SAMPLES / 2];
    double flood_p99 = flooded[STATUS_SAMPLES * 99 / 100];
    print_message("status latency: idle p50 %.2f ms p99 %.2f ms; during the flood p50 %.2f ms "
                  "p99 %.2f ms; the flooder had sent %llu datagrams before and %llu after\n",
                  idle_p50, idle_p99, flood_p50, flood_p99, before, after);
    DH_CHECK(d, after > before, "the flood ended before the samples did; they measured nothing");
    /* Generous: a shared machine's noise, not a benchmark (bench/ has the
     * ratio); a loop starved by the flood would take seconds. */
    DH_CHECK(d, flood_p99 < 10 * idle_p99 + 50,
             "status p99 %.2f ms during the flood against %.2f ms idle", flood_p99, idle_p99);
    json_object *status = dh_status(d, "flood");
    bool serving = strcmp(dh_json_str(status, "state"), "serving") == 0;
    json_object_put(status);
    DH_CHECK(d, serving, "the flooding host stopped serving");
    dh_stop_and_check_clean(d);
}

/* Waits up to 10 s for host's log to be rotated: output.log.1 there,
 * whose stat goes into *rotated_st; the paths of both files in current
 * and rotated. */
static void wait_for_rotation(dh_daemon *d, const char *host, char current[PATH_MAX],
                              char rotated[PATH_MAX], struct stat *rotated_st)
{
    snprintf(current, PATH_MAX, "%s/hosts/%s/log/output.log", d->drv.state_dir, host);
    snprintf(rotated, PATH_MAX, "%s/hosts/%s/log/output.log.1", d->drv.state_dir, host);
    bool rotated_seen = false;
    for (int i = 0; i < 100 && !rotated_seen; i++) {
        dd_sleep_ms(100);
        rotated_seen = stat(rotated, rotated_st) == 0;
    }
    DH_CHECK(d, rotated_seen, "%s did not appear", rotated);
}

static void test_the_log_file_rotates_by_size(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, "HostLogMaxSize=64K\n");
    host_script script;
    /* 300 KB of output from inside the generation, then ready. */
    add_script_host(
        d, "chatty", SCRIPT_READY_PROBE,
        "#!/bin/sh\n"
        "i=0\n"
        "while [ $i -lt 3000 ]; do\n"
        "  echo \"chatty line $i: "
        "0123456789012345678901234567890123456789012345678901234567890123456789012345678\"\n"
        "  i=$((i + 1))\n"
        "done\n",
        &script);
    dh_start(d, NULL);
    dh_wake(d, "chatty");

    char current[PATH_MAX], rotated[PATH_MAX];
    struct stat st;
    wait_for_rotation(d, "chatty", current, rotated, &st);
    /* The keeper rotates once a write takes the file to 64K: a rotated file
     * holds at least that and at most one more read of the pipe. */
    DH_CHECK(d, st.st_size >= 64 * 1024 && st.st_size <= 2 * 64 * 1024,
             "%s holds %lld bytes, not between the 64K it rotated at and 128K", rotated,
             (long long)st.st_size);
    bool has_last = false;
    for (int i = 0; i < 100 && !has_last; i++) {
        char *old = dh_read_text(rotated), *now = dh_read_text(current);
        has_last =
            (old && strstr(old, "chatty line 2999:")) || (now && strstr(now, "chatty line 2999:"));
        free(old);
        free(now);
        if (!has_last)
            dd_sleep_ms(100);
    }
    DH_CHECK(d, has_last, "neither %s nor %s has the host's last line", current, rotated);
    DH_CHECK(d, stat(current, &st) == 0 && st.st_size < 64 * 1024,
             "%s is past its bound (%lld bytes)", current, (long long)st.st_size);
    /* Not a line of it in the daemon's own output. */
    char *log = dh_read_text(d->drv.log_path);
    bool leaked = log && strstr(log, "chatty line");
    free(log);
    DH_CHECK(d, !leaked, "the host's output reached the daemon's own stream");
    dh_stop_and_check_clean(d);
    remove_script(&script);
}

/* Waits up to 10 s for text in host's output.log; whether it came. */
static bool wait_for_output(dh_daemon *d, const char *host, const char *text)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/hosts/%s/log/output.log", d->drv.state_dir, host);
    for (int i = 0; i < 100; i++) {
        char *now = dh_read_text(path);
        bool found = now && strstr(now, text);
        free(now);
        if (found)
            return true;
        dd_sleep_ms(100);
    }
    return false;
}

/* A host tries to grow its output to 2 GiB with ftruncate() (sparse: it
 * writes almost nothing). Its output is the log keeper's pipe, which
 * cannot be truncated: the file stays small. */
static void grow_the_log(dh_daemon *d, bool keeper)
{
    dh_setup(d, DH_STORE_DIR, "HostLogMaxSize=64K\n");
    host_script script;
    add_script_host(d, "grower", SCRIPT_READY_PROBE,
                    "#!/bin/sh\n"
                    "echo before the hole\n"
                    "perl -e 'if (truncate(STDOUT, 2 * 1024**3)) { print \"grown to 2 GiB\\n\" }"
                    " else { print \"truncate refused: $!\\n\" }'\n"
                    "echo after the hole\n",
                    &script);
    const char *const no_keeper[] = {"ACTIVATOR_TEST_NO_LOG_KEEPER=1", NULL};
    dh_start(d, keeper ? NULL : no_keeper);
    dh_wake(d, "grower");

    if (keeper) {
        DH_CHECK(d, wait_for_output(d, "grower", "after the hole"),
                 "the host's output did not reach its log");
        DH_CHECK(d, wait_for_output(d, "grower", "truncate refused"),
                 "the host's truncate of its output was not refused");
        char path[PATH_MAX];
        struct stat st;
        snprintf(path, sizeof(path), "%s/hosts/grower/log/output.log", d->drv.state_dir);
        DH_CHECK(d, stat(path, &st) == 0 && st.st_size < 64 * 1024 && st.st_blocks * 512 < 1 << 20,
                 "%s grew to %lld bytes", path, (long long)st.st_size);
    } else {
        /* The control: the host holds the file itself, and grows it. Its
         * rotation then costs no more than HostLogMaxSize=: only the
         * file's tail is read, its hole skipped (copying the whole file,
         * as rotations once did, writes 2 GiB of zeros into output.log.1). */
        char current[PATH_MAX], rotated[PATH_MAX];
        struct stat st;
        wait_for_rotation(d, "grower", current, rotated, &st);
        DH_CHECK(d, st.st_size <= 2 * 64 * 1024, "%s holds %lld bytes, more than its bound",
                 rotated, (long long)st.st_size);
        char *old = dh_read_text(rotated);
        bool grown = old && strstr(old, "grown to 2 GiB") && strstr(old, "after the hole");
        free(old);
        DH_CHECK(d, grown, "%s lacks what followed the hole", rotated);
    }
    dh_stop_and_check_clean(d);
    remove_script(&script);
}

static void test_a_host_cannot_grow_its_log(void **state)
{
    grow_the_log(*state, true);
}

static void test_without_the_keeper_a_grown_log_costs_a_rotation_its_bound(void **state)
{
    grow_the_log(*state, false);
}

/* The highest N of the lines "tick PID N" that pid wrote into host's
 * output.log; -1: none. With pid 0, the first pid seen goes into *pid. */
static long last_tick(dh_daemon *d, const char *host, long *pid)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/hosts/%s/log/output.log", d->drv.state_dir, host);
    char *text = dh_read_text(path);
    long last = -1;
    for (const char *at = text; at && (at = strstr(at, "tick ")); at += 5) {
        long who, n;
        if (sscanf(at, "tick %ld %ld", &who, &n) != 2)
            continue;
        if (!*pid)
            *pid = who;
        if (who == *pid && n > last)
            last = n;
    }
    free(text);
    return last;
}

/* Waits up to 20 s for pid's ticks to pass after; whether they did. */
static bool ticks_pass(dh_daemon *d, const char *host, long pid, long after)
{
    for (int i = 0; i < 200; i++) {
        if (last_tick(d, host, &pid) > after)
            return true;
        dd_sleep_ms(100);
    }
    return false;
}

/* The keeper's pid, from its cgroup under the daemon's root; 0: none. */
static pid_t keeper_pid(dh_daemon *d)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/log-keeper/cgroup.procs", d->drv.cgroup_path);
    char *text = dh_read_text(path);
    pid_t pid = text ? (pid_t)atoi(text) : 0;
    free(text);
    return pid;
}

/* A generation's output is a pipe that outlives both its readers one at a
 * time: the daemon killed, the keeper goes on writing what the host says;
 * the keeper killed, the daemon starts another and hands it the pipe. The
 * same process writes throughout: a pipe left without a reader would have
 * killed it (SIGPIPE) at its next line. */
static void test_output_outlives_the_daemon_and_the_keeper(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    host_script script;
    add_script_host(d, "ticker", SCRIPT_REPLICA,
                    "#!/bin/sh\n"
                    "i=0\n"
                    "while :; do echo \"tick $$ $i\"; i=$((i + 1)); sleep 0.05; done\n",
                    &script);
    dh_start(d, NULL);
    dh_wake(d, "ticker");
    long pid = 0;
    DH_CHECK(d, ticks_pass(d, "ticker", 0, 2), "the ticker's output did not reach its log");
    last_tick(d, "ticker", &pid);
    pid_t first_keeper = keeper_pid(d);
    DH_CHECK(d, first_keeper > 0, "no log keeper in %s/log-keeper", d->drv.cgroup_path);
    /* What tenants write is all it reads: it holds no capability. */
    char status_path[64];
    snprintf(status_path, sizeof(status_path), "/proc/%d/status", (int)first_keeper);
    char *status = dh_read_text(status_path);
    bool unprivileged = status && strstr(status, "\nCapEff:\t0000000000000000\n") &&
                        strstr(status, "\nCapBnd:\t0000000000000000\n") &&
                        strstr(status, "\nNoNewPrivs:\t1\n");
    free(status);
    DH_CHECK(d, unprivileged, "the log keeper (pid %d) holds capabilities", (int)first_keeper);

    dh_kill(d);
    long before = last_tick(d, "ticker", &pid);
    DH_CHECK(d, ticks_pass(d, "ticker", pid, before + 5),
             "with the daemon killed, the ticker's output stopped at tick %ld", before);
    DH_CHECK(d, keeper_pid(d) == first_keeper, "the keeper did not outlive the daemon");

    dh_start(d, NULL);
    DH_CHECK(d, kill(first_keeper, SIGKILL) == 0 && dh_pid_gone(first_keeper),
             "cannot kill the keeper (pid %d)", (int)first_keeper);
    before = last_tick(d, "ticker", &pid);
    DH_CHECK(d, ticks_pass(d, "ticker", pid, before + 5),
             "with the keeper killed, the ticker's output stopped at tick %ld", before);
    pid_t second_keeper = keeper_pid(d);
    DH_CHECK(d, second_keeper > 0 && second_keeper != first_keeper,
             "no other keeper took over (pid %d)", (int)second_keeper);
    DH_CHECK(d, kill((pid_t)pid, 0) == 0, "the ticker (pid %ld) died", pid);
    dh_stop_and_check_clean(d);
    remove_script(&script);
}

int main(void)
{
    int r = dh_check_can_run("daemon-surfaces", DH_STORE_DIR);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_ready_exec_probe_runs_as_the_host_in_its_leaf),
        DH_TEST(test_notify_socket_is_the_hosts_alone),
        DH_TEST(test_a_notify_flood_leaves_the_daemon_answering),
        DH_TEST(test_the_log_file_rotates_by_size),
        DH_TEST(test_a_host_cannot_grow_its_log),
        DH_TEST(test_without_the_keeper_a_grown_log_costs_a_rotation_its_bound),
        DH_TEST(test_output_outlives_the_daemon_and_the_keeper),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
