/* Who a host runs as and what it may call, on the real daemon with real
 * processes: without User= each host has a dynamic uid of its own from
 * DynamicUserRange=, the same after a restart and never another host's;
 * User=root runs as root only in a user namespace of its own, as its
 * dynamic user on the box (and --check-config warns); no generation has a
 * capability unless AmbientCapabilities= names it; the default seccomp
 * allow-list refuses keyrings, io_uring, mount and chroot with EPERM, and
 * SystemCallFilter= adds to it and takes off it; PidsMax= is 4096 unless
 * the file says otherwise; RLIMIT_NOFILE is LimitNOFILE= (65536 by
 * default), not the daemon's own. act-testapp
 * --isolation-report writes what it could do into its state directory. */
#include <errno.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <netinet/in.h>
#include <stddef.h>
#include <sys/shm.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

/* DynamicUserRange='s default. */
#define RANGE_MIN 1879048192u
#define RANGE_MAX 1879113727u

/* The value of "Key:" in /proc/<pid>/status, or "" when missing. */
static void status_field(dh_daemon *d, int64_t pid, const char *key, char *out, size_t size)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%" PRId64 "/status", pid);
    char *text = dh_read_text(path);
    DH_CHECK(d, text, "cannot read %s", path);
    out[0] = '\0';
    size_t len = strlen(key);
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
        if (strncmp(line, key, len) == 0 && line[len] == ':') {
            const char *value = line + len + 1;
            value += strspn(value, " \t");
            snprintf(out, size, "%s", value);
            break;
        }
    free(text);
}

static uint64_t status_hex(dh_daemon *d, int64_t pid, const char *key)
{
    char value[64];
    status_field(d, pid, key, value, sizeof(value));
    DH_CHECK(d, value[0], "no %s in /proc/%" PRId64 "/status", key, pid);
    return strtoull(value, NULL, 16);
}

/* The uid the process runs as, checked to be one id for real, effective,
 * saved and file system uid, and the same for its gids, with no
 * supplementary groups. */
static unsigned run_as(dh_daemon *d, int64_t pid)
{
    char uids[128], gids[128], groups[128];
    status_field(d, pid, "Uid", uids, sizeof(uids));
    status_field(d, pid, "Gid", gids, sizeof(gids));
    status_field(d, pid, "Groups", groups, sizeof(groups));
    unsigned u[4] = {0}, g[4] = {0};
    DH_CHECK(d,
             sscanf(uids, "%u %u %u %u", &u[0], &u[1], &u[2], &u[3]) == 4 &&
                 sscanf(gids, "%u %u %u %u", &g[0], &g[1], &g[2], &g[3]) == 4,
             "pid %" PRId64 ": Uid: %s Gid: %s", pid, uids, gids);
    for (int i = 1; i < 4; i++)
        DH_CHECK(d, u[i] == u[0] && g[i] == g[0], "pid %" PRId64 ": Uid: %s Gid: %s", pid, uids,
                 gids);
    DH_CHECK(d, groups[0] == '\0', "pid %" PRId64 " has supplementary groups: %s", pid, groups);
    return u[0];
}

static void expect_caps(dh_daemon *d, int64_t pid, uint64_t expected)
{
    const char *keys[] = {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"};
    for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
        uint64_t got = status_hex(d, pid, keys[i]);
        DH_CHECK(d, got == expected, "pid %" PRId64 ": %s is %016" PRIx64 ", expected %016" PRIx64,
                 pid, keys[i], got, expected);
    }
    char value[32];
    status_field(d, pid, "NoNewPrivs", value, sizeof(value));
    DH_CHECK(d, strcmp(value, "1") == 0, "pid %" PRId64 ": NoNewPrivs %s", pid, value);
    status_field(d, pid, "Seccomp", value, sizeof(value));
    DH_CHECK(d, strcmp(value, "2") == 0, "pid %" PRId64 ": Seccomp %s", pid, value);
}

static void state_path(dh_daemon *d, const char *host, const char *name, char *out, size_t size)
{
    snprintf(out, size, "%s/hosts/%s/state%s%s", d->drv.state_dir, host, name ? "/" : "",
             name ? name : "");
}

/* act-testapp's report from the host's state directory (waited for). */
static char *isolation_report(dh_daemon *d, const char *host)
{
    char path[PATH_MAX];
    state_path(d, host, "isolation-report", path, sizeof(path));
    for (int i = 0; i < 500; i++) {
        char *text = dh_read_text(path);
        if (text && strstr(text, "end\n"))
            return text;
        free(text);
        usleep(10000);
    }
    DH_CHECK(d, false, "host %s wrote no %s", host, path);
    return NULL;
}

static void expect_result(dh_daemon *d, const char *report, const char *name, const char *expected)
{
    char line[128];
    snprintf(line, sizeof(line), "\n%s=%s\n", name, expected);
    char *copy = NULL;
    DH_CHECK(d, asprintf(&copy, "\n%s", report) > 0, "out of memory");
    bool found = strstr(copy, line) != NULL;
    free(copy);
    DH_CHECK(d, found, "expected %s=%s in the report:\n%s", name, expected, report);
}

/* What is refused by permissions is, inside the default filesystem view,
 * not even there: either answer keeps the tenant out. */
static void expect_kept_out(dh_daemon *d, const char *report, const char *name)
{
    char denied[128], absent[128];
    snprintf(denied, sizeof(denied), "\n%s=EACCES\n", name);
    snprintf(absent, sizeof(absent), "\n%s=ENOENT\n", name);
    char *copy = NULL;
    DH_CHECK(d, asprintf(&copy, "\n%s", report) > 0, "out of memory");
    bool found = strstr(copy, denied) || strstr(copy, absent);
    free(copy);
    DH_CHECK(d, found, "expected %s=EACCES or ENOENT in the report:\n%s", name, report);
}

/* The default PidsMax= (4096) holds pid of host's generation: as pids.max
 * in its v2 leaf where the v2 pids controller is enabled, else (a hybrid
 * host, whose v1 mirror every spawn would pay a migration to join) as the
 * RLIMIT_NPROC of its own uid, with no v1 mirror made. */
static void expect_default_pids_bound(dh_daemon *d, const char *host, uint64_t generation,
                                      int64_t pid)
{
    char leaf_name[32];
    snprintf(leaf_name, sizeof(leaf_name), "g-%" PRIu64, generation);
    cg_leaf *leaf = NULL;
    act_error err = {0};
    DH_CHECK(d, cg_leaf_open(d->drv.cgroups, host, leaf_name, &leaf, &err) == 0, "%s", err.message);
    bool v1_mirror = cg_leaf_v1_path(leaf, "pids") != NULL;
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/pids.max", cg_leaf_path(leaf));
    cg_leaf_free(leaf);
    DH_CHECK(d, !v1_mirror, "%s's leaf has a v1 pids mirror for the default PidsMax=", host);
    if (access(path, F_OK) == 0) {
        char *text = dh_read_text(path);
        DH_CHECK(d, text && strncmp(text, "4096\n", 5) == 0, "%s has %s, expected 4096", path,
                 text ? text : "nothing");
        free(text);
        return;
    }
    snprintf(path, sizeof(path), "/proc/%" PRId64 "/limits", pid);
    char *limits = dh_read_text(path);
    DH_CHECK(d, limits, "cannot read %s", path);
    const char *line = strstr(limits, "Max processes");
    unsigned long soft = 0, hard = 0;
    DH_CHECK(d, line && sscanf(line, "Max processes %lu %lu", &soft, &hard) == 2,
             "no Max processes in %s:\n%s", path, limits);
    free(limits);
    DH_CHECK(d, soft == 4096 && hard == 4096, "%s's RLIMIT_NPROC is %lu/%lu, expected 4096", host,
             soft, hard);
}

/* The default MemoryMax= (a quarter of the box's memory) holds host's
 * generation as memory.max in its v2 leaf where the v2 memory controller
 * is enabled; where memory is v1 only (this kind of test machine), no v1
 * mirror is made for it, and the daemon said so at start. */
static void expect_default_memory_bound(dh_daemon *d, const char *host, uint64_t generation)
{
    char leaf_name[32];
    snprintf(leaf_name, sizeof(leaf_name), "g-%" PRIu64, generation);
    cg_leaf *leaf = NULL;
    act_error err = {0};
    DH_CHECK(d, cg_leaf_open(d->drv.cgroups, host, leaf_name, &leaf, &err) == 0, "%s", err.message);
    bool v1_mirror = cg_leaf_v1_path(leaf, "memory") != NULL;
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/memory.max", cg_leaf_path(leaf));
    cg_leaf_free(leaf);
    DH_CHECK(d, !v1_mirror, "%s's leaf has a v1 memory mirror for the default MemoryMax=", host);
    if (access(path, F_OK) < 0) {
        DH_CHECK(d, dh_log_wait(d, "hosts without MemoryMax= run without its default", 1000),
                 "memory is not limited in %s's v2 leaf, and the daemon did not say why", host);
        return;
    }
    char *text = dh_read_text(path);
    unsigned long long bytes = text ? strtoull(text, NULL, 10) : 0;
    free(text);
    /* The kernel keeps whole pages. */
    unsigned long long box =
        (unsigned long long)sysconf(_SC_PHYS_PAGES) * (unsigned long long)sysconf(_SC_PAGESIZE);
    unsigned long long expected = box * 2500 / 10000 / 4096 * 4096;
    DH_CHECK(d, bytes == expected, "%s has %llu, expected %llu (a quarter of the box's memory)",
             path, bytes, expected);
}

/* uid when the dynamic users' records give it to host, or 0. */
static unsigned recorded_uid(dh_daemon *d, const char *host, unsigned uid)
{
    char path[PATH_MAX], line[128], want[128];
    snprintf(path, sizeof(path), "%s/dynamic-users/records", d->drv.state_dir);
    snprintf(want, sizeof(want), "%u %s\n", uid, host);
    FILE *f = fopen(path, "re");
    bool found = false;
    while (f && !found && fgets(line, sizeof(line), f))
        found = strcmp(line, want) == 0;
    if (f)
        fclose(f);
    return found ? uid : 0;
}

static void test_hosts_run_as_dynamic_users_of_their_own(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    int port1 =
        dh_add_app_host(d, "web1", "--isolation-report", "Environment=ACT_OTHER_HOST=web2\n");
    int port2 = dh_add_app_host(d, "web2", "--isolation-report", NULL);
    /* web1 ran as root before: what it left is handed to its new user. */
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/hosts/web1", d->drv.state_dir);
    char command[4 * PATH_MAX + 128];
    snprintf(command, sizeof(command),
             "mkdir -p -m 0711 %s && mkdir -m 0750 %s/state && mkdir %s/state/data && "
             "touch %s/state/data/old",
             path, path, path, path);
    DH_CHECK(d, system(command) == 0, "cannot run %s", command);
    strcat(path, "/state/data");
    dh_start(d, NULL);
    /* web2 first: web1 reports at its start what it could do to web2's
     * state directory. */
    int64_t pid2 = dh_wake(d, "web2").pid;
    dh_served served1 = dh_wake(d, "web1");
    int64_t pid1 = served1.pid;
    /* No PidsMax= in the file: the default bounds it. */
    expect_default_pids_bound(d, "web1", served1.generation, pid1);
    expect_default_memory_bound(d, "web1", served1.generation);
    DH_CHECK(d, dh_answer_pid(port1) == pid1 && dh_answer_pid(port2) == pid2,
             "the hosts do not answer");
    unsigned uid1 = run_as(d, pid1), uid2 = run_as(d, pid2);
    printf("web1 runs as uid %u, web2 as uid %u\n", uid1, uid2);
    DH_CHECK(d, uid1 >= RANGE_MIN && uid1 <= RANGE_MAX && uid2 >= RANGE_MIN && uid2 <= RANGE_MAX,
             "uids %u and %u are not in DynamicUserRange=%u-%u", uid1, uid2, RANGE_MIN, RANGE_MAX);
    DH_CHECK(d, uid1 != uid2, "web1 and web2 share uid %u", uid1);
    DH_CHECK(d, recorded_uid(d, "web1", uid1) && recorded_uid(d, "web2", uid2),
             "the uids are not recorded in %s/dynamic-users", d->drv.state_dir);
    expect_caps(d, pid1, 0);
    expect_caps(d, pid2, 0);

    /* Its state directory is its own, and the ones on the way let it in. */
    struct stat st;
    DH_CHECK(d, stat(path, &st) == 0 && st.st_uid == uid1, "%s is uid %u's, not web1's", path,
             (unsigned)st.st_uid);
    strcat(path, "/old");
    DH_CHECK(d, stat(path, &st) == 0 && st.st_uid == uid1 && st.st_gid == uid1,
             "%s is uid %u's, not web1's", path, (unsigned)st.st_uid);
    state_path(d, "web1", NULL, path, sizeof(path));
    DH_CHECK(d,
             stat(path, &st) == 0 && st.st_uid == uid1 && st.st_gid == uid1 &&
                 (st.st_mode & 07777) == 0750,
             "%s: uid %u gid %u mode %o", path, (unsigned)st.st_uid, (unsigned)st.st_gid,
             (unsigned)(st.st_mode & 07777));
    char *report = isolation_report(d, "web1");
    char expected[32];
    snprintf(expected, sizeof(expected), "%u", uid1);
    expect_result(d, report, "uid", expected);
    const char *refused[] = {"keyctl",         "add_key",      "chroot", "mount",
                             "io_uring_setup", "unshare_user", "setuid0"};
    for (size_t i = 0; i < ARRAY_SIZE(refused); i++)
        expect_result(d, report, refused[i], "EPERM");
    expect_result(d, report, "bind80", "EACCES");
    /* Nothing beside its own state directory is its to write or list. */
    const char *closed[] = {"write_releases", "write_manifest", "list_hosts", "write_other_state",
                            "list_other_state"};
    for (size_t i = 0; i < ARRAY_SIZE(closed); i++)
        expect_kept_out(d, report, closed[i]);
    expect_result(d, report, "socket", "ok");
    expect_result(d, report, "uname", "ok");
    long bits = strtol(strstr(report, "securebits=") + 11, NULL, 10);
    DH_CHECK(d,
             (bits & SECBIT_NOROOT) && (bits & SECBIT_NOROOT_LOCKED) &&
                 (bits & SECBIT_NO_SETUID_FIXUP_LOCKED) && (bits & SECBIT_KEEP_CAPS_LOCKED),
             "securebits %#lx", bits);
    free(report);

    /* The next daemon gives each host the same uid again, and refuses a
     * host whose User= names one of them. */
    dh_stop_and_check_clean(d);
    dh_write_host(d, "thief", "[Host]\nExec=bin/x\nUser=%u\n", uid1);
    dh_start(d, NULL);
    char refusal[128];
    snprintf(refusal, sizeof(refusal), "uid %u is the dynamic user of host web1", uid1);
    DH_CHECK(d, dh_log_wait(d, refusal, 5000), "host thief with User=%u was not refused", uid1);
    pid1 = dh_wake(d, "web1").pid;
    pid2 = dh_wake(d, "web2").pid;
    DH_CHECK(d, run_as(d, pid1) == uid1 && run_as(d, pid2) == uid2,
             "after a restart web1 runs as %u (was %u), web2 as %u (was %u)", run_as(d, pid1), uid1,
             run_as(d, pid2), uid2);
    dh_stop_and_check_clean(d);
}

/* Many hosts: every one gets a uid of its own, even where their names hash
 * to the same uid of a narrow range (five uids: the harness's beacon host
 * takes one too). */
static void test_colliding_hosts_get_distinct_uids(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, "DynamicUserRange=61184-61188\n");
    enum { HOSTS = 4 };
    int64_t pids[HOSTS];
    char name[HOSTS][16];
    for (int i = 0; i < HOSTS; i++) {
        snprintf(name[i], sizeof(name[i]), "h%d", i);
        dh_add_app_host(d, name[i], NULL, NULL);
    }
    dh_start(d, NULL);
    unsigned uids[HOSTS];
    for (int i = 0; i < HOSTS; i++) {
        pids[i] = dh_wake(d, name[i]).pid;
        uids[i] = run_as(d, pids[i]);
        DH_CHECK(d, uids[i] >= 61184 && uids[i] <= 61188, "%s runs as %u", name[i], uids[i]);
        for (int j = 0; j < i; j++)
            DH_CHECK(d, uids[i] != uids[j], "%s and %s share uid %u", name[i], name[j], uids[i]);
    }
    dh_stop_and_check_clean(d);

    /* A fifth host finds the range full: it is refused, naming the range,
     * and the others still serve. */
    dh_add_app_host(d, "h4", NULL, NULL);
    dh_start(d, NULL);
    DH_CHECK(d, dh_log_wait(d, "no uid of DynamicUserRange=61184-61188 is free", 5000),
             "the full range is not reported");
    DH_CHECK(d, run_as(d, dh_wake(d, "h0").pid) == uids[0], "h0 changed uid");
    dh_stop_and_check_clean(d);
}

static void test_user_root_and_ambient_capabilities(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    /* A socket in /run only root may connect to, as systemd's private bus
     * and a container engine's are. */
    char root_socket[64], extra[PATH_MAX + 160];
    snprintf(root_socket, sizeof(root_socket), "/run/act-test-%d.sock", (int)getpid());
    int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", root_socket);
    unlink(root_socket);
    DH_CHECK(d,
             listener >= 0 && bind(listener, (struct sockaddr *)&addr, sizeof(addr)) == 0 &&
                 chmod(root_socket, 0600) == 0 && listen(listener, 8) == 0,
             "cannot listen on %s: %s", root_socket, strerror(errno));
    /* Its health check, a probe the daemon starts, notes who it is. */
    char probe[PATH_MAX];
    snprintf(probe, sizeof(probe), "%s/whoami.sh", d->drv.dir);
    FILE *f = fopen(probe, "we");
    DH_CHECK(d,
             f && fputs("#!/bin/sh\n{ id -u; cat /proc/self/uid_map; } > probe-id\n", f) >= 0 &&
                 fclose(f) == 0 && chmod(probe, 0755) == 0,
             "cannot write %s", probe);
    snprintf(extra, sizeof(extra),
             "User=root\nEnvironment=ACT_ROOT_SOCKET=%s\nHealthCheck=exec:%s\n", root_socket,
             probe);
    dh_add_app_host(d, "rooted", "--isolation-report", extra);
    snprintf(extra, sizeof(extra),
             "User=root\nFilesystemView=box\nEnvironment=ACT_ROOT_SOCKET=%s\n", root_socket);
    dh_add_app_host(d, "rooted-box", "--isolation-report", extra);
    dh_add_app_host(d, "web80", "--isolation-report", "AmbientCapabilities=CAP_NET_BIND_SERVICE\n");
    dh_add_app_host(d, "filtered", "--isolation-report",
                    "[Limits]\nSystemCallFilter=@keyring chroot\nSystemCallFilter=~uname\n");

    char out[8192];
    char *const argv[] = {(char *)DH_ACTIVATORD, (char *)"--check-config", (char *)"--config",
                          d->drv.config_path, NULL};
    int status = dh_run(argv, out, sizeof(out));
    /* FILE:LINE: User: warning: ..., on the User= line of the harness's file. */
    char where[PATH_MAX];
    snprintf(where, sizeof(where), "%s/rooted.conf:", d->drv.hosts_dir);
    const char *line = strstr(out, where);
    const char *end = line ? strchr(line, '\n') : NULL;
    const char *warning = line ? strstr(line, ": User: warning:") : NULL;
    DH_CHECK(d, status == 0 && warning && (!end || warning < end) && strstr(out, "with warnings"),
             "--check-config exited %d without the warning \"%s<line>: User: warning:\":\n%s",
             status, where, out);

    /* Root in a user namespace of its own: uid 0 to itself, its dynamic
     * user on the box, which owns its state directory. Each defence keeps
     * it out alone: the view (rooted) and the user namespace (rooted-box,
     * the box's files, where the kernel checks the uid it really has). */
    dh_start(d, NULL);
    int64_t pid = dh_wake(d, "rooted").pid;
    unsigned uid = run_as(d, pid);
    DH_CHECK(d, uid >= RANGE_MIN && uid <= RANGE_MAX,
             "User=root runs as %u on the box, not as a dynamic user of DynamicUserRange=", uid);
    expect_caps(d, pid, 0);
    char path[PATH_MAX];
    state_path(d, "rooted", NULL, path, sizeof(path));
    struct stat st;
    DH_CHECK(d, stat(path, &st) == 0 && st.st_uid == uid && st.st_gid == uid,
             "%s is not owned by %u:%u", path, uid, uid);
    bool sysrq = access("/proc/sysrq-trigger", F_OK) == 0;
    char *report = isolation_report(d, "rooted");
    expect_result(d, report, "uid", "0");
    expect_result(d, report, "gid", "0");
    expect_result(d, report, "mount", "EPERM");
    expect_result(d, report, "keyctl", "EPERM");
    /* The kernel checks the uid before the read-only mount. */
    expect_result(d, report, "kernel_setting", "EACCES");
    expect_result(d, report, "sysrq", sysrq ? "EACCES" : "ENOENT");
    expect_result(d, report, "disk", "ENOENT");
    expect_result(d, report, "dev_null", "ok");
    expect_result(d, report, "root_socket", "ENOENT");
    expect_result(d, report, "signal_root", "EPERM");
    free(report);
    /* So is the probe: root to itself, the same uid on the box. */
    state_path(d, "rooted", "probe-id", path, sizeof(path));
    char *probe_id = dh_read_text(path);
    unsigned inside = 1, outside = 0, count = 0;
    DH_CHECK(d,
             probe_id &&
                 sscanf(probe_id, "%u %u %u %u", &inside, &(unsigned){0}, &outside, &count) == 4 &&
                 inside == 0 && outside == uid && count == 1,
             "the health check's probe is not root in a namespace mapped to %u: %s", uid,
             probe_id ? probe_id : "(no probe-id)");
    free(probe_id);
    pid = dh_wake(d, "rooted-box").pid;
    report = isolation_report(d, "rooted-box");
    expect_result(d, report, "uid", "0");
    expect_result(d, report, "kernel_setting", "EACCES");
    expect_result(d, report, "sysrq", sysrq ? "EACCES" : "ENOENT");
    DH_CHECK(d, strstr(report, "\ndisk=ENOENT\n") || strstr(report, "\ndisk=EACCES\n"),
             "rooted-box opened a disk:\n%s", report);
    expect_result(d, report, "root_socket", "EACCES");
    expect_result(d, report, "signal_root", "EPERM");
    free(report);
    dh_stop_and_check_clean(d);

    /* The controls, in a test build that runs User=root as the box's
     * root: the view alone still keeps rooted out, and the same root with
     * the box's filesystem gets through, so each defence above is one. */
    const char *const as_box_root[] = {"ACTIVATOR_TEST_ROOT_WITHOUT_USER_NAMESPACE=1", NULL};
    const char *hosts[] = {"rooted", "rooted-box"};
    for (size_t i = 0; i < ARRAY_SIZE(hosts); i++) {
        state_path(d, hosts[i], "isolation-report", path, sizeof(path));
        unlink(path);
    }
    dh_start(d, as_box_root);
    pid = dh_wake(d, "rooted").pid;
    DH_CHECK(d, run_as(d, pid) == 0, "the control's User=root does not run as root");
    expect_caps(d, pid, 0);
    report = isolation_report(d, "rooted");
    expect_result(d, report, "kernel_setting", "EROFS");
    expect_result(d, report, "sysrq", sysrq ? "EROFS" : "ENOENT");
    expect_result(d, report, "disk", "ENOENT");
    expect_result(d, report, "root_socket", "ENOENT");
    expect_result(d, report, "signal_root", "ok");
    free(report);
    pid = dh_wake(d, "rooted-box").pid;
    report = isolation_report(d, "rooted-box");
    expect_result(d, report, "kernel_setting", "ok");
    expect_result(d, report, "sysrq", sysrq ? "ok" : "ENOENT");
    if (strstr(report, "\ndisk=ENOENT\n"))
        print_message("this box's /dev has no block device; that control is untried\n");
    else
        expect_result(d, report, "disk", "ok");
    expect_result(d, report, "root_socket", "ok");
    expect_result(d, report, "signal_root", "ok");
    free(report);
    close(listener);
    unlink(root_socket);
    dh_stop_and_check_clean(d);
    dh_start(d, NULL);

    pid = dh_wake(d, "web80").pid;
    expect_caps(d, pid, 1ULL << CAP_NET_BIND_SERVICE);
    report = isolation_report(d, "web80");
    DH_CHECK(d, strstr(report, "\nbind80=ok\n") || strstr(report, "\nbind80=EADDRINUSE\n"),
             "AmbientCapabilities=CAP_NET_BIND_SERVICE cannot bind port 80:\n%s", report);
    expect_result(d, report, "setuid0", "EPERM");
    free(report);

    /* SystemCallFilter=: keyrings and chroot allowed (chroot then fails on
     * the missing path), uname taken off, the rest as by default. */
    pid = dh_wake(d, "filtered").pid;
    report = isolation_report(d, "filtered");
    expect_result(d, report, "keyctl", "ok");
    expect_result(d, report, "chroot", "ENOENT");
    expect_result(d, report, "uname", "EPERM");
    expect_result(d, report, "mount", "EPERM");
    expect_result(d, report, "io_uring_setup", "EPERM");
    free(report);
    dh_stop_and_check_clean(d);
}

/* --check-config refuses AmbientCapabilities= with User=root (config-files
 * tests that); a daemon started on such a file leaves that host out with
 * the same sentence, gives it no dynamic user, and serves the others. */
static void test_root_with_capabilities_is_left_out_at_start(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    dh_add_app_host(d, "rootcaps", "--isolation-report",
                    "User=root\nAmbientCapabilities=CAP_NET_BIND_SERVICE\n");
    dh_add_app_host(d, "plain", "--isolation-report", NULL);
    dh_start(d, NULL);
    DH_CHECK(d,
             dh_log_wait(d,
                         "host rootcaps: AmbientCapabilities= with User=root: a root host runs "
                         "as root in a user namespace of its own",
                         5000),
             "the daemon did not refuse AmbientCapabilities= with User=root");
    DH_CHECK(d, dh_log_wait(d, "(host not served)", 5000), "host rootcaps was not left out");
    char records[PATH_MAX];
    snprintf(records, sizeof(records), "%s/dynamic-users/records", d->drv.state_dir);
    char *text = dh_read_text(records);
    DH_CHECK(d, !text || !strstr(text, " rootcaps"),
             "the refused host was given a dynamic user:\n%s", text);
    free(text);
    DH_CHECK(d, dh_wake(d, "plain").pid > 0, "the other host does not serve");
    dh_stop_and_check_clean(d);
}

/* Every problem names file, line, key and what to do. */
static void test_bad_isolation_config_is_reported(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, "DynamicUserRange=65519-61184\n");
    dh_write_host(d, "badcap", "[Host]\nExec=bin/x\nAmbientCapabilities=CAP_NET_BIND_SERVIC\n");
    dh_write_host(d, "badcall", "[Host]\nExec=bin/x\n[Limits]\nSystemCallFilter=~keyctl mountt\n");
    dh_write_host(d, "badgroup", "[Host]\nExec=bin/x\n[Limits]\nSystemCallFilter=@nosuch\n");
    char out[8192];
    char *const argv[] = {(char *)DH_ACTIVATORD, (char *)"--check-config", (char *)"--config",
                          d->drv.config_path, NULL};
    int status = dh_run(argv, out, sizeof(out));
    DH_CHECK(d, status == 1, "--check-config exited %d:\n%s", status, out);
    DH_CHECK(d, strstr(out, "DynamicUserRange: \"65519-61184\" ends below its start"),
             "the bad range is not reported:\n%s", out);

    /* The daemon file fixed, the host files are reported. */
    char *conf = dh_read_text(d->drv.config_path);
    DH_CHECK(d, conf, "cannot read %s", d->drv.config_path);
    char *range = strstr(conf, "65519-61184");
    DH_CHECK(d, range, "no DynamicUserRange= in %s", conf);
    memcpy(range, "70000-80000", 11);
    FILE *f = fopen(d->drv.config_path, "we");
    DH_CHECK(d, f && fputs(conf, f) >= 0 && fclose(f) == 0, "cannot rewrite %s",
             d->drv.config_path);
    free(conf);
    status = dh_run(argv, out, sizeof(out));
    char line[PATH_MAX + 128];
    snprintf(line, sizeof(line),
             "%s/badcap.conf:3: AmbientCapabilities: \"CAP_NET_BIND_SERVIC\" is not a capability",
             d->drv.hosts_dir);
    DH_CHECK(d, status == 1 && strstr(out, line), "expected \"%s\":\n%s", line, out);
    snprintf(line, sizeof(line),
             "%s/badcall.conf:4: SystemCallFilter: \"mountt\" is not a system call",
             d->drv.hosts_dir);
    DH_CHECK(d, strstr(out, line), "expected \"%s\":\n%s", line, out);
    snprintf(line, sizeof(line),
             "%s/badgroup.conf:4: SystemCallFilter: @nosuch is not one of systemd's system call "
             "groups",
             d->drv.hosts_dir);
    DH_CHECK(d, strstr(out, line), "expected \"%s\":\n%s", line, out);
}

/* "Max open files" of /proc/<pid>/limits: its soft and hard limits. */
static void open_files_limits(dh_daemon *d, int64_t pid, unsigned long *soft, unsigned long *hard)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%" PRId64 "/limits", pid);
    char *text = dh_read_text(path);
    const char *line = text ? strstr(text, "Max open files") : NULL;
    DH_CHECK(d, line && sscanf(line + strlen("Max open files"), "%lu %lu", soft, hard) == 2,
             "no \"Max open files\" in %s", path);
    free(text);
}

/* The size= of the tmpfs on /tmp in pid's mount namespace, in KiB; 0
 * when it has none. */
static unsigned long tmp_size_kib(dh_daemon *d, int64_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%" PRId64 "/mounts", pid);
    char *text = dh_read_text(path);
    DH_CHECK(d, text, "cannot read %s", path);
    unsigned long kib = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        const char *size = strstr(line, "size=");
        if (strncmp(line, "tmpfs /tmp ", 11) == 0 && size)
            kib = strtoul(size + 5, NULL, 10);
    }
    free(text);
    return kib;
}

static void test_private_tmp_is_bounded_by_private_tmp_size(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    dh_add_app_host(d, "plain", NULL, NULL);
    dh_add_app_host(d, "small", NULL, "[Limits]\nPrivateTmpSize=64M\n");
    dh_start(d, NULL);
    unsigned long kib = tmp_size_kib(d, dh_wake(d, "plain").pid);
    DH_CHECK(d, kib == 256 * 1024, "a host without PrivateTmpSize= has a /tmp of %lu KiB", kib);
    kib = tmp_size_kib(d, dh_wake(d, "small").pid);
    DH_CHECK(d, kib == 64 * 1024, "PrivateTmpSize=64M gave a /tmp of %lu KiB", kib);
    dh_stop_and_check_clean(d);
}

/* Each generation's SysV objects are its own (PrivateIPC=yes, the
 * default): a segment it leaves is not the box's, and dies with it; with
 * PrivateIPC=no, the control, the box sees it. */
static void test_ipc_is_private_to_the_generation(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    key_t private_key = 0x41430000 | (getpid() & 0xfff), shared_key = private_key | 0x1000;
    char extra[128];
    snprintf(extra, sizeof(extra), "Environment=ACT_SHM_KEY=%d\n", (int)private_key);
    dh_add_app_host(d, "private", "--isolation-report", extra);
    snprintf(extra, sizeof(extra), "Environment=ACT_SHM_KEY=%d\nPrivateIPC=no\n", (int)shared_key);
    dh_add_app_host(d, "shared", "--isolation-report", extra);
    dh_start(d, NULL);
    dh_wake(d, "private");
    char *report = isolation_report(d, "private");
    expect_result(d, report, "sysv_shm", "ok");
    free(report);
    int id = shmget(private_key, 0, 0);
    DH_CHECK(d, id < 0 && errno == ENOENT,
             "a segment a host with a private IPC namespace made is the box's (shmget: %d, %s)", id,
             id < 0 ? strerror(errno) : "found");
    dh_wake(d, "shared");
    report = isolation_report(d, "shared");
    expect_result(d, report, "sysv_shm", "ok");
    free(report);
    id = shmget(shared_key, 0, 0);
    if (id >= 0)
        shmctl(id, IPC_RMID, NULL);
    DH_CHECK(d, id >= 0, "with PrivateIPC=no the box does not see the host's segment: %s",
             strerror(errno));
    dh_stop_and_check_clean(d);
}

/* PrivateNetwork=yes: the app serves through the sockets the daemon
 * passed it, and reaches neither a port of the box's loopback nor an
 * abstract unix socket; without it (the control), both. */
static void test_private_network_serves_and_reaches_nothing(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    int box_port = 0;
    int listener = dh_listen_loopback(d, &box_port);
    char abstract[64];
    snprintf(abstract, sizeof(abstract), "act-test-%d", (int)getpid());
    int unix_listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    memcpy(addr.sun_path + 1, abstract, strlen(abstract));
    socklen_t addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(abstract));
    DH_CHECK(d,
             bind(unix_listener, (struct sockaddr *)&addr, addr_len) == 0 &&
                 listen(unix_listener, 8) == 0,
             "cannot listen on @%s: %s", abstract, strerror(errno));
    char env[256], extra[320];
    snprintf(env, sizeof(env), "Environment=ACT_NET_PORT=%d ACT_ABSTRACT=%s\n", box_port, abstract);
    dh_add_app_host(d, "open", "--isolation-report", env);
    snprintf(extra, sizeof(extra), "%sPrivateNetwork=yes\n", env);
    int port = dh_add_app_host(d, "closed", "--isolation-report", extra);
    dh_start(d, NULL);
    const char *hosts[] = {"open", "closed"};
    const char *expected[] = {"ok", "ECONNREFUSED"};
    for (size_t i = 0; i < 2; i++) {
        dh_wake(d, hosts[i]);
        char *report = isolation_report(d, hosts[i]);
        expect_result(d, report, "net_box_port", expected[i]);
        expect_result(d, report, "net_abstract", expected[i]);
        free(report);
    }
    char body[256];
    DH_CHECK(d, dh_http_get(port, body, sizeof(body)) > 0,
             "a host with PrivateNetwork=yes does not serve on its socket");
    close(listener);
    close(unix_listener);
    dh_stop_and_check_clean(d);
}

/* Connects to the user database socket at path, sends call (its calls,
 * each with its NUL) and reads that many answers, each up to its NUL, into
 * out; the bytes read, 0 when the daemon closed the connection without
 * one. */
static size_t userdb_call(dh_daemon *d, const char *path, const char *call, size_t call_len,
                          unsigned answers, char *out, size_t size)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
    DH_CHECK(d, fd >= 0 && connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0,
             "cannot connect to %s: %s", path, strerror(errno));
    struct timeval timeout = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    /* A call the daemon cuts off may not be taken whole: what arrives is
     * checked through the answer. */
    (void)!send(fd, call, call_len, MSG_NOSIGNAL);
    size_t n = 0;
    unsigned ends = 0;
    while (n + 1 < size && ends < answers) {
        ssize_t got = read(fd, out + n, size - 1 - n);
        if (got <= 0)
            break;
        for (ssize_t i = 0; i < got; i++)
            ends += out[n + (size_t)i] == '\0';
        n += (size_t)got;
    }
    out[n] = '\0';
    close(fd);
    return n;
}

/* The hosts' dynamic users are in the box's user database: a service of
 * systemd's userdb interface answers for each host's uid with its name,
 * which systemd's clients (nss-systemd: ps, ls -l) show and its allocator
 * of DynamicUser= uids avoids; a call too long is cut off; the socket goes
 * with a clean stop. */
static void test_dynamic_users_are_in_the_user_database(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    char dir[PATH_MAX], socket_path[PATH_MAX + 64];
    snprintf(dir, sizeof(dir), "%s/userdb", d->drv.dir);
    DH_CHECK(d, mkdir(dir, 0755) == 0, "cannot make %s: %s", dir, strerror(errno));
    snprintf(socket_path, sizeof(socket_path), "%s/io.activator.DynamicUser", dir);
    dh_add_app_host(d, "web1", NULL, NULL);
    dh_start(d, NULL);
    unsigned uid = run_as(d, dh_wake(d, "web1").pid);
    char call[512], answer[4096];
    int n = snprintf(call, sizeof(call),
                     "{\"method\":\"io.systemd.UserDatabase.GetUserRecord\",\"parameters\":"
                     "{\"uid\":%u,\"service\":\"io.activator.DynamicUser\"}}",
                     uid);
    size_t got = userdb_call(d, socket_path, call, (size_t)n + 1, 1, answer, sizeof(answer));
    DH_CHECK(d, got > 0 && strstr(answer, "\"userName\":\"act-web1\""),
             "the user database answered uid %u with: %s", uid, answer);
    /* Two calls at once: two answers, in order. */
    char twice[1100];
    memcpy(twice, call, (size_t)n + 1);
    memcpy(twice + n + 1, call, (size_t)n + 1);
    got = userdb_call(d, socket_path, twice, 2 * ((size_t)n + 1), 2, answer, sizeof(answer));
    const char *second = got ? memchr(answer, '\0', got) : NULL;
    DH_CHECK(d, second && second + 1 < answer + got && strstr(second + 1, "act-web1"),
             "two calls at once did not get two answers (%zu bytes)", got);

    /* A call that never ends is cut off at its bound, unanswered. */
    char endless[8192];
    memset(endless, '{', sizeof(endless));
    got = userdb_call(d, socket_path, endless, sizeof(endless), 1, answer, sizeof(answer));
    DH_CHECK(d, got == 0, "a call of %zu bytes without its end got an answer: %s", sizeof(endless),
             answer);

    dh_stop_and_check_clean(d);
    DH_CHECK(d, access(socket_path, F_OK) < 0, "%s is left after a clean stop", socket_path);
}

static void test_open_files_are_bounded_by_limit_nofile(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    dh_add_app_host(d, "plain", NULL, NULL);
    dh_add_app_host(d, "narrow", NULL, "[Limits]\nLimitNOFILE=1024:4096\n");
    dh_start(d, NULL);
    /* The daemon's own hard limit (ours, which it inherits) caps it. */
    struct rlimit ours;
    DH_CHECK(d, getrlimit(RLIMIT_NOFILE, &ours) == 0, "getrlimit: %s", strerror(errno));
    unsigned long expected = ours.rlim_max < 65536 ? (unsigned long)ours.rlim_max : 65536;
    unsigned long soft = 0, hard = 0;
    open_files_limits(d, dh_wake(d, "plain").pid, &soft, &hard);
    DH_CHECK(d, soft == expected && hard == expected,
             "a host without LimitNOFILE= may open %lu (hard %lu) files, not %lu", soft, hard,
             expected);
    open_files_limits(d, dh_wake(d, "narrow").pid, &soft, &hard);
    DH_CHECK(d, soft == 1024 && hard == 4096, "LimitNOFILE=1024:4096 gave soft %lu, hard %lu", soft,
             hard);
    dh_stop_and_check_clean(d);
}

int main(void)
{
    int r = dh_check_can_run("daemon-isolation", DH_STORE_DIR);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_hosts_run_as_dynamic_users_of_their_own),
        DH_TEST(test_colliding_hosts_get_distinct_uids),
        DH_TEST(test_user_root_and_ambient_capabilities),
        DH_TEST(test_root_with_capabilities_is_left_out_at_start),
        DH_TEST(test_bad_isolation_config_is_reported),
        DH_TEST(test_open_files_are_bounded_by_limit_nofile),
        DH_TEST(test_private_tmp_is_bounded_by_private_tmp_size),
        DH_TEST(test_ipc_is_private_to_the_generation),
        DH_TEST(test_private_network_serves_and_reaches_nothing),
        DH_TEST(test_dynamic_users_are_in_the_user_database),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
