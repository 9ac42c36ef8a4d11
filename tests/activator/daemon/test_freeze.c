/* Freeze parking (ParkMode=freeze): an idle host's generation is frozen with
 * the cgroup v2 freezer instead of retired, and the next connection thaws
 * it, served by the very same process. Each test here would fail if the
 * freeze did not happen (the leaf's cgroup.events says so, and its CPU time
 * stands still), if a client were left waiting on a frozen app, or if a
 * frozen generation outlived what should retire it: a claim that moved,
 * FrozenMaxSec=, the box's memory pressure. A daemon killed while a host is
 * frozen leaves it frozen, and the next one resumes it so. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* Freezes after a second without a client; ThawCheck= as given. */
#define FREEZE_HOST "ParkMode=freeze\nIdleTimeoutSec=1\n"
/* The box's memory pressure (PSI) is the whole machine's: a test that is
 * not about it turns it off, or a stall of the machine's (the test before
 * it made one on purpose; a CI box under load makes its own) retires the
 * frozen generation it watches. */
#define NO_PRESSURE "FreezeMemoryPressure=no\n"

/* A daemon with host (a FREEZE_HOST, and extra_host_lines), deaf to the
 * machine's memory pressure; host's port. */
static int start_freezing(dh_daemon *d, const char *host, const char *extra_host_lines)
{
    char lines[256];
    snprintf(lines, sizeof(lines), "%s%s", FREEZE_HOST, extra_host_lines ? extra_host_lines : "");
    dh_setup(d, DH_STORE_DIR, NO_PRESSURE);
    int port = dh_add_app_host(d, host, NULL, lines);
    dh_start(d, NULL);
    return port;
}

/* <cgroup of host's generation>/<file>, from its status. */
static void leaf_file(dh_daemon *d, const char *host, const char *file, char *out, size_t size)
{
    json_object *status = dh_status(d, host);
    const char *cgroup = dh_json_str(status, "cgroup");
    DH_CHECK(d, cgroup != NULL, "host %s has no generation: %s", host,
             json_object_to_json_string(status));
    snprintf(out, size, "%s/%s", cgroup, file);
    json_object_put(status);
}

/* A "key value" line of a flat-keyed cgroup file, or UINT64_MAX. */
static uint64_t keyed(const char *path, const char *key)
{
    char *text = dh_read_text(path);
    uint64_t value = UINT64_MAX;
    size_t len = strlen(key);
    for (char *line = text; line && *line;) {
        if (strncmp(line, key, len) == 0 && line[len] == ' ') {
            value = strtoull(line + len + 1, NULL, 10);
            break;
        }
        char *next = strchr(line, '\n');
        line = next ? next + 1 : NULL;
    }
    free(text);
    return value;
}

static bool leaf_frozen(dh_daemon *d, const char *host)
{
    char path[PATH_MAX];
    leaf_file(d, host, "cgroup.events", path, sizeof(path));
    return keyed(path, "frozen") == 1;
}

static bool claim_phase_is(dh_daemon *d, const char *host, const char *phase, int timeout_ms)
{
    claim c;
    return dh_claim_wait_phase(d, host, phase, timeout_ms, &c);
}

static const char *state_of(dh_daemon *d, const char *host, char *out, size_t size)
{
    json_object *status = dh_status(d, host);
    snprintf(out, size, "%s", dh_json_str(status, "state") ? dh_json_str(status, "state") : "");
    json_object_put(status);
    return out;
}

/* Wakes host and waits until the daemon says it froze. */
static int64_t wake_and_freeze(dh_daemon *d, const char *host)
{
    dh_events_mark(d);
    int64_t pid = dh_wake(d, host).pid;
    DH_CHECK(d, dh_event_wait(d, host, "frozen", 15000, NULL), "host %s did not freeze", host);
    return pid;
}

static void test_idle_host_is_frozen_and_the_same_pid_answers(void **state)
{
    dh_daemon *d = *state;
    int port = start_freezing(d, "demo", NULL);
    int64_t pid = wake_and_freeze(d, "demo");

    char text[64];
    DH_CHECK(d, strcmp(state_of(d, "demo", text, sizeof(text)), "frozen") == 0, "status says %s",
             text);
    DH_CHECK(d, leaf_frozen(d, "demo"), "cgroup.events does not say frozen 1");
    DH_CHECK(d, claim_phase_is(d, "demo", "frozen", 5000), "the claim does not say frozen");
    /* Its CPU time stands still: the app's own timers do not run either. */
    char cpu_stat[PATH_MAX];
    leaf_file(d, "demo", "cpu.stat", cpu_stat, sizeof(cpu_stat));
    uint64_t before = keyed(cpu_stat, "usage_usec");
    usleep(500 * 1000); /* a span to measure over, not a window to hit */
    uint64_t after = keyed(cpu_stat, "usage_usec");
    DH_CHECK(d, before != UINT64_MAX && after == before,
             "a frozen leaf used CPU: %" PRIu64 " then %" PRIu64 " usec", before, after);
    DH_CHECK(d, kill((pid_t)pid, 0) == 0, "the frozen app is gone");

    dh_events_mark(d);
    DH_CHECK(d, dh_answer_pid(port) == pid, "the connection was not answered by pid %lld",
             (long long)pid);
    DH_CHECK(d, dh_event_wait(d, "demo", "thawed", 5000, NULL), "no thawed event");
    DH_CHECK(d, !leaf_frozen(d, "demo"), "the leaf is still frozen after serving");
    DH_CHECK(d, claim_phase_is(d, "demo", "serving", 5000), "the claim does not say serving again");
    DH_CHECK(d, dh_events_count(d, "demo", "exec") == 0, "the thaw started a new generation");
    /* Idle again: frozen again, by the same generation. */
    DH_CHECK(d, dh_event_wait(d, "demo", "frozen", 15000, NULL), "it did not freeze again");
    dh_stop_and_check_clean(d);
}

/* The app is frozen but the daemon has not taken it as frozen yet (held by
 * ACTIVATOR_TEST_FREEZE_HOLD): a client then must still be answered. */
static void test_client_during_the_freeze_is_answered(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NO_PRESSURE);
    int port = dh_add_app_host(d, "demo", NULL, FREEZE_HOST);
    char hold[PATH_MAX], env[PATH_MAX + 64];
    snprintf(hold, sizeof(hold), "%s/freeze-go", d->drv.dir);
    snprintf(env, sizeof(env), "ACTIVATOR_TEST_FREEZE_HOLD=%s", hold);
    dh_start(d, (const char *const[]){env, NULL});
    int64_t pid = dh_wake(d, "demo").pid;
    DH_CHECK(d, dh_log_wait(d, "freeze held", 15000), "the freeze was not held");
    DH_CHECK(d, leaf_frozen(d, "demo"), "held, but the leaf is not frozen");

    dh_events_mark(d);
    DH_CHECK(d, dh_answer_pid(port) == pid, "a client in the middle of the freeze was not served");
    DH_CHECK(d, dh_event_wait(d, "demo", "thawed", 5000, NULL), "no thawed event");
    /* The held settle comes too late to count: the host serves on. */
    int fd = open(hold, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    DH_CHECK(d, fd >= 0, "cannot create %s", hold);
    close(fd);
    DH_CHECK(d, dh_answer_pid(port) == pid, "not served after the hold ended");
    char text[64];
    DH_CHECK(d, strcmp(state_of(d, "demo", text, sizeof(text)), "frozen") != 0,
             "status says frozen while it serves");
    DH_CHECK(d,
             dh_events_count(d, "demo", "frozen") == 0 ||
                 dh_event_wait(d, "demo", "thawed", 15000, NULL),
             "frozen again without a thaw");
    dh_stop_and_check_clean(d);
}

/* Another box took the host while it was frozen: the frozen generation does
 * not serve the next client, and is retired (killed frozen). */
static void test_claim_moved_while_frozen_is_not_served(void **state)
{
    dh_daemon *d = *state;
    int port = start_freezing(d, "demo", "ThawCheck=claim\n");
    int64_t pid = wake_and_freeze(d, "demo");
    DH_CHECK(d, claim_phase_is(d, "demo", "frozen", 5000), "the claim is not frozen");
    dh_events_mark(d);
    dh_claim_take_for(d, "demo", DH_OTHER_BOX);
    int64_t answered = dh_answer_pid(port);
    DH_CHECK(d, answered != pid, "the frozen generation served a host another box owns");
    DH_CHECK(d, dh_event_wait(d, "demo", "retired", 15000, NULL), "it was not retired");
    DH_CHECK(d, dh_pid_gone((pid_t)pid), "the app still runs");
    DH_CHECK(d, dh_events_count(d, "demo", "thawed") == 0, "it was thawed");
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo did not park");
    dh_stop_and_check_clean(d);
}

static void test_frozen_max_retires(void **state)
{
    dh_daemon *d = *state;
    start_freezing(d, "demo", "FrozenMaxSec=1\n");
    int64_t pid = wake_and_freeze(d, "demo");
    DH_CHECK(d, dh_event_wait(d, "demo", "retired", 15000, NULL),
             "not retired after FrozenMaxSec=");
    DH_CHECK(d, dh_pid_gone((pid_t)pid), "the app still runs");
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo did not park");
    DH_CHECK(d, claim_phase_is(d, "demo", "parked", 5000), "the claim is not parked");
    dh_stop_and_check_clean(d);
}

/* cg-memhog beside CG_STUCK: the cgroup tests' apps, built without ASan. */
static void memhog_path(char *out, size_t size)
{
    char stuck[PATH_MAX];
    snprintf(stuck, sizeof(stuck), "%s", CG_STUCK);
    snprintf(out, size, "%s/cg-memhog", dirname(stuck));
}

static void test_memory_pressure_retires_the_coldest_frozen_first(void **state)
{
    dh_daemon *d = *state;
    /* 1 ms of stall within PSI's window: anything of the hog's is pressure. */
    dh_setup(d, DH_STORE_DIR, "FreezeMemoryPressure=1ms\n");
    dh_add_app_host(d, "cold", NULL, "ParkMode=freeze\nIdleTimeoutSec=0\n");
    dh_add_app_host(d, "warm", NULL, "ParkMode=freeze\nIdleTimeoutSec=0\n");
    int serving_port = dh_add_app_host(d, "busy", NULL, "IdleTimeoutSec=0\n");
    dh_start(d, NULL);
    int64_t busy = dh_wake(d, "busy").pid;
    int64_t cold = dh_wake(d, "cold").pid, warm = dh_wake(d, "warm").pid;
    dh_events_mark(d);
    json_object *reply = dh_request(d, 10000, "{\"v\":1,\"op\":\"freeze\",\"host\":\"cold\"}");
    DH_CHECK(d, dh_reply_ok(reply), "freeze cold: %s", json_object_to_json_string(reply));
    json_object_put(reply);
    DH_CHECK(d, dh_event_wait(d, "cold", "frozen", 10000, NULL), "cold did not freeze");
    reply = dh_request(d, 10000, "{\"v\":1,\"op\":\"freeze\",\"host\":\"warm\"}");
    DH_CHECK(d, dh_reply_ok(reply), "freeze warm: %s", json_object_to_json_string(reply));
    json_object_put(reply);
    DH_CHECK(d, dh_event_wait(d, "warm", "frozen", 10000, NULL), "warm did not freeze");

    /* The hog: its own leaf, with a MemoryMax= it outgrows at once, so the
     * kernel reclaims for it (the box's PSI counts that stall) until it is
     * killed, and a shell starts it again until the test stops them. */
    cg_root *hog_root = NULL;
    cg_leaf *hog_leaf = NULL;
    act_error err = {0};
    DH_CHECK(d, cg_root_create_throwaway("freeze-hog", &hog_root, &err) == 0, "%s", err.message);
    cg_limits limits = {.memory_max = 32 << 20};
    DH_CHECK(d, cg_leaf_create(hog_root, "hog", "g-1", &limits, &hog_leaf, &err) == 0, "%s",
             err.message);
    char hog[PATH_MAX], procs[PATH_MAX], v1_procs[PATH_MAX] = "";
    memhog_path(hog, sizeof(hog));
    snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg_leaf_path(hog_leaf));
    /* On a hybrid box the memory controller is v1's: its mirror of the
     * leaf holds the limit. */
    const char *v1_memory = cg_leaf_v1_path(hog_leaf, "memory");
    if (v1_memory)
        snprintf(v1_procs, sizeof(v1_procs), "%s/cgroup.procs", v1_memory);
    pid_t child = fork();
    if (child == 0) {
        for (int i = 0; i < 2; i++) {
            const char *path = i == 0 ? procs : v1_procs;
            if (!path[0])
                continue;
            int fd = open(path, O_WRONLY | O_CLOEXEC);
            if (fd < 0 || write(fd, "0", 1) != 1)
                _exit(126);
            close(fd);
        }
        char loop[PATH_MAX + 64];
        snprintf(loop, sizeof(loop), "while :; do %s 400 >/dev/null; done", hog);
        execl("/bin/sh", "sh", "-c", loop, (char *)NULL);
        _exit(127);
    }
    DH_CHECK(d, child > 0, "fork: %s", strerror(errno));

    dh_event cold_parking, warm_parking;
    bool cold_retired = dh_event_wait(d, "cold", "parking", 30000, &cold_parking);
    bool warm_retired = dh_event_wait(d, "warm", "parking", 30000, &warm_parking);
    int killed = cg_leaf_kill_and_wait(hog_leaf, 10 * 1000 * 1000, &err);
    waitpid(child, NULL, 0);
    cg_leaf_remove(hog_leaf, NULL);
    cg_leaf_free(hog_leaf);
    cg_root_destroy_throwaway(hog_root, NULL);
    DH_CHECK(d, killed == 0, "the hog could not be stopped: %s", err.message);
    DH_CHECK(d, cold_retired && warm_retired, "pressure did not retire both (cold %d, warm %d)",
             cold_retired, warm_retired);
    DH_CHECK(d, cold_parking.seq < warm_parking.seq,
             "warm (frozen last) was retired before cold (frozen first)");
    DH_CHECK(d, dh_pid_gone((pid_t)cold) && dh_pid_gone((pid_t)warm), "a frozen app still runs");
    /* What serves is no frozen host's: pressure leaves it alone. */
    DH_CHECK(d, dh_answer_pid(serving_port) == busy, "the serving host was touched");
    DH_CHECK(d, dh_events_count(d, "busy", "parking") == 0, "the serving host was parked");
    dh_stop_and_check_clean(d);
}

static void test_frozen_host_survives_a_daemon_crash_frozen(void **state)
{
    dh_daemon *d = *state;
    int port = start_freezing(d, "demo", NULL);
    int64_t pid = wake_and_freeze(d, "demo");
    char events[PATH_MAX];
    leaf_file(d, "demo", "cgroup.events", events, sizeof(events));
    dh_kill(d);
    DH_CHECK(d, keyed(events, "frozen") == 1, "the leaf thawed when the daemon died");

    dh_start(d, NULL);
    DH_CHECK(d, dh_log_wait(d, "left frozen by the previous daemon", 5000),
             "the next daemon did not resume it frozen");
    char text[64];
    DH_CHECK(d, strcmp(state_of(d, "demo", text, sizeof(text)), "frozen") == 0,
             "status after the restart says %s", text);
    DH_CHECK(d, keyed(events, "frozen") == 1, "the resumed generation is not frozen");
    dh_events_mark(d);
    DH_CHECK(d, dh_answer_pid(port) == pid, "the connection was not answered by pid %lld",
             (long long)pid);
    DH_CHECK(d, dh_event_wait(d, "demo", "thawed", 5000, NULL), "no thawed event");
    dh_stop_and_check_clean(d);
}

/* The soak's break at +239 s: a client waited on a frozen host while its
 * daemon was gone; the next daemon, freezing the resumed generation again,
 * saw the client and thawed it, but left the claim saying frozen while the
 * generation served. Its client is answered and the claim says serving. */
static void test_a_client_waiting_across_a_crash_thaws_it_and_the_claim_says_so(void **state)
{
    dh_daemon *d = *state;
    int port = start_freezing(d, "demo", NULL);
    int64_t pid = wake_and_freeze(d, "demo");
    DH_CHECK(d, claim_phase_is(d, "demo", "frozen", 5000), "the claim does not say frozen");
    dh_kill(d);
    /* Connected while no daemon runs: the kernel completes it into the
     * backlog of the socket the frozen app holds. */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET,
                               .sin_port = htons((uint16_t)port),
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    static const char request[] = "GET / HTTP/1.0\r\n\r\n";
    DH_CHECK(d,
             fd >= 0 && connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0 &&
                 send(fd, request, sizeof(request) - 1, MSG_NOSIGNAL) > 0,
             "cannot connect to the frozen host: %s", strerror(errno));

    dh_start(d, NULL);
    struct timeval timeout = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    char answer[1024] = "";
    size_t used = 0;
    ssize_t n;
    while (used < sizeof(answer) - 1 &&
           (n = recv(fd, answer + used, sizeof(answer) - 1 - used, 0)) > 0)
        used += (size_t)n;
    answer[used] = '\0';
    close(fd);
    char want[32];
    snprintf(want, sizeof(want), "pid=%lld", (long long)pid);
    DH_CHECK(d, strstr(answer, want) != NULL,
             "the client that waited across the crash got \"%s\", not an answer of %s", answer,
             want);
    DH_CHECK(d, claim_phase_is(d, "demo", "serving", 5000),
             "the resumed generation serves, thawed for the client, but the claim does not say "
             "serving");
    dh_stop_and_check_clean(d);
}

int main(void)
{
    int r = dh_check_can_run("daemon-freeze", DH_STORE_DIR);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_idle_host_is_frozen_and_the_same_pid_answers),
        DH_TEST(test_client_during_the_freeze_is_answered),
        DH_TEST(test_claim_moved_while_frozen_is_not_served),
        DH_TEST(test_frozen_max_retires),
        DH_TEST(test_memory_pressure_retires_the_coldest_frozen_first),
        DH_TEST(test_frozen_host_survives_a_daemon_crash_frozen),
        DH_TEST(test_a_client_waiting_across_a_crash_thaws_it_and_the_claim_says_so),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
