/* Reload against the real daemon (SIGHUP and `activatorctl reload` are the
 * same reload; systemctl reload runs the latter):
 *   - a host file added is served: a connection to it wakes it, and the
 *     other hosts keep their pids;
 *   - a host file removed: its generation is retired with proof, its port
 *     refuses connections and its sockets leave the FD store; its file put
 *     back makes a host of that name again;
 *   - MemoryMax= changed: the running leaf has the new limit at once;
 *   - a second ListenStream=: both addresses serve the next generation,
 *     and a client of the address that stays is never refused;
 *   - Exec= changed: status says the config is pending, and the next
 *     generation runs it;
 *   - a broken edit: every problem reported as --check-config reports it,
 *     and nothing changes;
 *   - Box= changed: refused by name, with the restart it needs; budgets
 *     and MetricsListen= apply in place. */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

#ifndef DH_ACTIVATORCTL
#error "DH_ACTIVATORCTL must name the activatorctl executable"
#endif
#ifndef DH_ACTIVATORD
#error "DH_ACTIVATORD must name the activatord executable"
#endif

/* `activatorctl reload` (or another command with no argument); its exit
 * status, its output in out. */
static int ctl(dh_daemon *d, const char *command, const char *host, char *out, size_t size)
{
    char *const argv[] = {(char *)DH_ACTIVATORCTL, (char *)"--connect", d->drv.control_url,
                          (char *)"--no-color", (char *)command, (char *)host, NULL};
    return dh_run(argv, out, size);
}

static void reload_ok(dh_daemon *d, char *out, size_t size)
{
    int status = ctl(d, "reload", NULL, out, size);
    DH_CHECK(d, status == 0, "activatorctl reload exited %d:\n%s", status, out);
}

static int64_t answering_pid(dh_daemon *d, int port)
{
    int64_t pid = dh_answer_pid(port);
    DH_CHECK(d, pid > 0, "nothing answers on port %d", port);
    return pid;
}

/* Waits until something other than old answers on port. */
static int64_t wait_new_pid(dh_daemon *d, int port, int64_t old)
{
    for (int i = 0; i < 200; i++) {
        int64_t pid = dh_answer_pid(port);
        if (pid > 0 && pid != old)
            return pid;
        dd_sleep_ms(50);
    }
    DH_CHECK(d, false, "port %d still answers with pid %" PRId64, port, old);
    return -1;
}

/* The memory limit of host's leaf g-<generation>, as the kernel has it:
 * the v1 mirror's on a hybrid host, else the v2 leaf's. */
static uint64_t leaf_memory_limit(dh_daemon *d, const char *host, uint64_t generation)
{
    char leaf_name[32];
    snprintf(leaf_name, sizeof(leaf_name), "g-%" PRIu64, generation);
    cg_leaf *leaf = NULL;
    act_error err = {0};
    DH_CHECK(d, cg_leaf_open(d->drv.cgroups, host, leaf_name, &leaf, &err) == 0, "%s",
             err.message);
    const char *v1 = cg_leaf_v1_path(leaf, "memory");
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", v1 ? v1 : cg_leaf_path(leaf),
             v1 ? "memory.limit_in_bytes" : "memory.max");
    cg_leaf_free(leaf);
    char *text = dh_read_text(path);
    DH_CHECK(d, text, "cannot read %s", path);
    uint64_t limit = strtoull(text, NULL, 10);
    free(text);
    return limit;
}

static bool connection_refused(int port)
{
    char body[256];
    return dh_http_get(port, body, sizeof(body)) == -ECONNREFUSED;
}

static void test_sighup_adds_a_host_and_keeps_the_others(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    int kept_port = dh_add_app_host(d, "kept", NULL, NULL);
    dh_start(d, NULL);
    int64_t kept_pid = dh_wake(d, "kept").pid;

    int added_port = dh_add_app_host(d, "added", NULL, NULL);
    DH_CHECK(d, kill(d->drv.pid, SIGHUP) == 0, "cannot send SIGHUP");
    char status[256];
    DH_CHECK(d, dh_notify_status_wait(d, "reloaded: hosts 1 added, 0 removed", 10000, status,
                                      sizeof(status)),
             "STATUS= after SIGHUP: %s", status);
    unsigned reloading = 0, ready = 0;
    dd_notify_reloads(&d->drv, &reloading, &ready);
    DH_CHECK(d, reloading == 1 && ready == 2, "RELOADING=1 %u times, READY=1 %u times",
             reloading, ready);
    char names[512];
    dh_notify_stored_fds(d, names, sizeof(names));
    DH_CHECK(d, strstr(names, "added/0"), "the new socket is not in the FD store: %s", names);

    /* A plain connection wakes the new host. */
    int64_t added_pid = answering_pid(d, added_port);
    DH_CHECK(d, dh_event_wait(d, "added", "serving", 5000, NULL), "added did not serve");
    json_object *added = dh_status(d, "added");
    DH_CHECK(d, (int64_t)dh_json_u64(added, "pid") == added_pid, "status of added: %s",
             json_object_to_json_string(added));
    json_object_put(added);
    DH_CHECK(d, answering_pid(d, kept_port) == kept_pid, "the other host was restarted");
    dh_stop_and_check_clean(d);
}

static void test_a_removed_host_is_retired_and_refuses(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    int stays_port = dh_add_app_host(d, "stays", NULL, NULL);
    int gone_port = dh_add_app_host(d, "gone", NULL, NULL);
    dh_start(d, NULL);
    int64_t stays_pid = dh_wake(d, "stays").pid;
    dh_served gone = dh_wake(d, "gone");
    claim before;
    DH_CHECK(d, dh_claim_get(d, "gone", &before), "gone has no claim");

    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/gone.conf", d->drv.hosts_dir);
    DH_CHECK(d, unlink(path) == 0, "cannot remove %s", path);
    char out[8192];
    reload_ok(d, out, sizeof(out));
    DH_CHECK(d, strstr(out, "gone") && strstr(out, "removed") && strstr(out, "2 hosts unchanged"),
             "activatorctl reload printed:\n%s", out);

    DH_CHECK(d, dh_event_wait(d, "gone", "retired", 10000, NULL),
             "the removed host's generation was not retired with proof");
    DH_CHECK(d, dh_pid_gone(gone.pid), "the removed host's app still runs");
    DH_CHECK(d, !dh_leaf_exists(d, "gone", "g-1"), "its leaf is left");
    DH_CHECK(d, connection_refused(gone_port), "the removed host's port still takes connections");
    char removed[512];
    dd_notify_removed_fds(&d->drv, removed, sizeof(removed));
    DH_CHECK(d, strstr(removed, "gone/0"), "its socket is still in the FD store: [%s]", removed);

    json_object *reply = dh_request(d, 10000, "{\"v\":1,\"op\":\"status\",\"host\":\"gone\"}");
    DH_CHECK(d, strcmp(dh_reply_code(reply), "unknown_host") == 0, "status of gone: %s",
             json_object_to_json_string(reply));
    json_object_put(reply);
    /* The claim stays this box's: nothing releases or deletes it. It only
     * comes to say what is true, that nothing runs (claim/write_backs.c). */
    claim after = {0};
    for (int waited = 0; waited < 10000; waited += 10) {
        DH_CHECK(d, dh_claim_get(d, "gone", &after), "the removed host's claim is gone");
        if (strcmp(after.op.phase, "parked") == 0)
            break;
        dd_sleep_ms(10);
    }
    DH_CHECK(d,
             strcmp(after.op.phase, "parked") == 0 &&
                 strcmp(claim_executor(&after), claim_executor(&before)) == 0 &&
                 after.holder.session == before.holder.session &&
                 after.holder.generation == before.holder.generation,
             "the removed host's claim should still name its box, parked: executor %s, phase "
             "%s, session %llu",
             claim_executor(&after), after.op.phase, (unsigned long long)after.holder.session);
    DH_CHECK(d, answering_pid(d, stays_port) == stays_pid, "the other host was restarted");

    /* Its file back: a host of that name again, on the same port. */
    dh_write_app_host(d, "gone", gone_port, NULL, NULL);
    reload_ok(d, out, sizeof(out));
    DH_CHECK(d, strstr(out, "gone") && strstr(out, "added"), "activatorctl reload printed:\n%s",
             out);
    int64_t again = answering_pid(d, gone_port);
    DH_CHECK(d, again != gone.pid, "the host added again answers with its old pid");
    dh_stop_and_check_clean(d);
}

static void test_memory_max_applies_to_the_running_leaf(void **state)
{
    dh_daemon *d = *state;
    int port = dh_start_with_host(d, DH_STORE_DIR, "web", NULL,
                                  "ReadyTimeoutSec=5\n[Limits]\nMemoryMax=64M\n");
    dh_served served = dh_wake(d, "web");
    DH_CHECK(d, leaf_memory_limit(d, "web", served.generation) == 64u << 20,
             "the leaf does not start with MemoryMax=64M");

    dh_write_app_host(d, "web", port, NULL, "ReadyTimeoutSec=5\n[Limits]\nMemoryMax=128M\n");
    char out[8192];
    reload_ok(d, out, sizeof(out));
    DH_CHECK(d, strstr(out, "web") && strstr(out, "applied"), "activatorctl reload printed:\n%s",
             out);
    uint64_t limit = leaf_memory_limit(d, "web", served.generation);
    DH_CHECK(d, limit == 128u << 20, "the running leaf's limit is %" PRIu64 ", not 128M", limit);
    DH_CHECK(d, answering_pid(d, port) == served.pid, "the app was restarted");
    json_object *status = dh_status(d, "web");
    DH_CHECK(d, !*dh_json_str(status, "config"), "a limit alone left a pending config: %s",
             json_object_to_json_string(status));
    json_object_put(status);
    dh_stop_and_check_clean(d);
}

static void test_a_new_address_serves_the_next_generation(void **state)
{
    dh_daemon *d = *state;
    int first = dh_start_with_host(d, DH_STORE_DIR, "web", NULL, NULL);
    int second = dh_free_port();
    int64_t pid = dh_wake(d, "web").pid;

    dh_busy_client client;
    dh_busy_client_start(d, &client, first, NULL);
    /* The new address comes first: the kept socket moves from web/0 to
     * web/1, and keeps its fd all the same. */
    char extra[128];
    snprintf(extra, sizeof(extra), "ReadyTimeoutSec=5\n[Listen]\nListenStream=127.0.0.1:%d\n",
             second);
    dh_write_app_host(d, "web", first, NULL, extra);
    char out[8192];
    reload_ok(d, out, sizeof(out));
    DH_CHECK(d, strstr(out, "web") && strstr(out, "changed"), "activatorctl reload printed:\n%s",
             out);
    DH_CHECK(d, answering_pid(d, first) == pid, "the running generation was replaced");
    char names[512], removed[512];
    dh_notify_stored_fds(d, names, sizeof(names));
    dd_notify_removed_fds(&d->drv, removed, sizeof(removed));
    DH_CHECK(d, strstr(names, "web/1") && strstr(removed, "web/0"),
             "the FD store was not told of the move: stored [%s], removed [%s]", names, removed);

    /* The next generation: the client keeps it waking. */
    dh_park(d, "web");
    int64_t next = wait_new_pid(d, first, pid);
    DH_CHECK(d, answering_pid(d, second) == next, "the new address does not serve generation 2");
    dh_busy_client_stop(&client);
    DH_CHECK(d, client.failed == 0, "%u of %u requests on the kept address failed; the first: %s",
             client.failed, client.failed + client.answered, client.first_failure);
    DH_CHECK(d, client.answered > 10, "only %u requests were answered", client.answered);
    dh_stop_and_check_clean(d);
}

static void test_exec_changes_wait_for_the_next_start(void **state)
{
    dh_daemon *d = *state;
    int port = dh_start_with_host(d, DH_STORE_DIR, "web", NULL, NULL);
    int64_t pid = dh_wake(d, "web").pid;

    dh_write_app_host(d, "web", port, "--version reloaded", NULL);
    char out[8192];
    reload_ok(d, out, sizeof(out));
    DH_CHECK(d, strstr(out, "pending next start"), "activatorctl reload printed:\n%s", out);
    json_object *status = dh_status(d, "web");
    DH_CHECK(d, strcmp(dh_json_str(status, "config"), "pending next start") == 0,
             "status after the reload: %s", json_object_to_json_string(status));
    json_object_put(status);
    int rc = ctl(d, "status", NULL, out, sizeof(out));
    DH_CHECK(d, rc == 0 && strstr(out, "CONFIG") && strstr(out, "pending next start"),
             "activatorctl status exited %d:\n%s", rc, out);
    char body[512];
    DH_CHECK(d, dh_http_get(port, body, sizeof(body)) > 0 && strstr(body, "version=v1"),
             "the running generation changed: %s", body);
    DH_CHECK(d, answering_pid(d, port) == pid, "the app was restarted by the reload");

    dh_park(d, "web");
    DH_CHECK(d, dh_wait_state(d, "web", "parked", 10000), "web did not park");
    dh_wake(d, "web");
    DH_CHECK(d, dh_http_get(port, body, sizeof(body)) > 0 && strstr(body, "version=reloaded"),
             "the next generation does not run the new Exec=: %s", body);
    status = dh_status(d, "web");
    DH_CHECK(d, !*dh_json_str(status, "config"), "still pending after the next start: %s",
             json_object_to_json_string(status));
    json_object_put(status);
    dh_stop_and_check_clean(d);
}

/* A port bound by this process, so the daemon cannot bind it. */
static int taken_port(dh_daemon *d, int *fd)
{
    *fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(addr);
    DH_CHECK(d,
             *fd >= 0 && bind(*fd, (struct sockaddr *)&addr, sizeof(addr)) == 0 &&
                 listen(*fd, 1) == 0 && getsockname(*fd, (struct sockaddr *)&addr, &len) == 0,
             "cannot take a port");
    return ntohs(addr.sin_port);
}

static void test_a_broken_edit_changes_nothing(void **state)
{
    dh_daemon *d = *state;
    int port = dh_start_with_host(d, DH_STORE_DIR, "web", NULL, NULL);
    int64_t pid = dh_wake(d, "web").pid;

    dh_write_host(d, "web",
                  "[Host]\n"                     /* 1 */
                  "Exec=act-e2e-app --version x\n" /* 2 */
                  "MaxStarts=9\n"                /* 3 */
                  "Frobnicate=yes\n"             /* 4 */
                  "[Listen]\n"                   /* 5 */
                  "ListenStream=127.0.0.1:%d\n", /* 6 */
                  port);
    int taken_fd = -1;
    dh_write_host(d, "newhost",
                  "[Host]\n"                     /* 1 */
                  "Exec=act-e2e-app\n"           /* 2 */
                  "[Listen]\n"                   /* 3 */
                  "ListenStream=127.0.0.1:%d\n", /* 4 */
                  taken_port(d, &taken_fd));
    char out[16384];
    int rc = ctl(d, "reload", NULL, out, sizeof(out));
    close(taken_fd);
    DH_CHECK(d, rc == 1, "activatorctl reload of a broken edit exited %d:\n%s", rc, out);

    /* Every line --check-config prints is there, and the address that
     * does not bind on its line too. */
    char checked[16384];
    char *const check[] = {(char *)DH_ACTIVATORD, (char *)"--check-config", (char *)"--config",
                           d->drv.config_path, NULL};
    DH_CHECK(d, dh_run(check, checked, sizeof(checked)) == 1, "--check-config passed:\n%s",
             checked);
    size_t lines = 0;
    for (char *line = strtok(checked, "\n"); line; line = strtok(NULL, "\n"), lines++)
        DH_CHECK(d, strstr(out, line), "the reload does not report \"%s\":\n%s", line, out);
    DH_CHECK(d, lines == 2, "--check-config found %zu problems", lines);
    char where[PATH_MAX + 64];
    snprintf(where, sizeof(where), "%s/newhost.conf:4: ListenStream: cannot bind",
             d->drv.hosts_dir);
    DH_CHECK(d, strstr(out, where), "the reload does not report \"%s\":\n%s", where, out);
    snprintf(where, sizeof(where), "%s/web.conf:3: MaxStarts:", d->drv.hosts_dir);
    DH_CHECK(d, dh_log_wait(d, where, 2000), "the log does not have \"%s\"", where);

    /* Nothing changed. */
    DH_CHECK(d, answering_pid(d, port) == pid, "the app was restarted");
    json_object *status = dh_status(d, "web");
    DH_CHECK(d, !*dh_json_str(status, "config"), "a refused reload left a pending config: %s",
             json_object_to_json_string(status));
    json_object_put(status);
    json_object *reply = dh_request(d, 10000, "{\"v\":1,\"op\":\"status\",\"host\":\"newhost\"}");
    DH_CHECK(d, strcmp(dh_reply_code(reply), "unknown_host") == 0, "status of newhost: %s",
             json_object_to_json_string(reply));
    json_object_put(reply);
    char last[256];
    DH_CHECK(d, dh_notify_status_wait(d, "reload refused", 2000, last, sizeof(last)),
             "STATUS= after a refused reload: %s", last);
    dh_stop_and_check_clean(d);
}

/* activatord.conf with from replaced by to. */
static void edit_daemon_file(dh_daemon *d, const char *from, const char *to)
{
    char *text = dh_read_text(d->drv.config_path);
    DH_CHECK(d, text, "cannot read %s", d->drv.config_path);
    char *at = strstr(text, from);
    DH_CHECK(d, at, "%s has no %s", d->drv.config_path, from);
    FILE *f = fopen(d->drv.config_path, "we");
    DH_CHECK(d, f, "cannot write %s", d->drv.config_path);
    fprintf(f, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    fclose(f);
    free(text);
}

static void test_box_cannot_change_but_budgets_can(void **state)
{
    dh_daemon *d = *state;
    dh_start_with_host(d, DH_STORE_DIR, "web", NULL, NULL);

    edit_daemon_file(d, "Box=" DH_BOX "\n", "Box=box-9\nMaxConcurrentStarts=3\n");
    char out[8192];
    int rc = ctl(d, "reload", NULL, out, sizeof(out));
    DH_CHECK(d,
             rc == 1 && strstr(out, "Box: cannot change while activatord runs") &&
                 strstr(out, "systemctl restart activatord"),
             "activatorctl reload of a new Box= exited %d:\n%s", rc, out);
    json_object *reply = dh_request(d, 10000, "{\"v\":1,\"op\":\"version\"}");
    DH_CHECK(d, strcmp(dh_json_str(dh_reply_result(reply), "box"), DH_BOX) == 0,
             "the box changed: %s", json_object_to_json_string(reply));
    json_object_put(reply);

    /* Budgets apply in place, and so does a new MetricsListen=. */
    int metrics_port = dh_free_port();
    char metrics[64];
    snprintf(metrics, sizeof(metrics), "MetricsListen=127.0.0.1:%d\n", metrics_port);
    edit_daemon_file(d, "Box=box-9\n", "Box=" DH_BOX "\n");
    edit_daemon_file(d, "MetricsListen=no\n", metrics);
    DH_CHECK(d, connection_refused(metrics_port), "something serves on the metrics port");
    reload_ok(d, out, sizeof(out));
    DH_CHECK(d, strstr(out, "daemon: applied MaxConcurrentStarts=, MetricsListen="),
             "activatorctl reload printed:\n%s", out);
    DH_CHECK(d, !connection_refused(metrics_port), "the new MetricsListen= does not serve");
    dh_wake(d, "web");
    dh_stop_and_check_clean(d);
}

int main(void)
{
    int r = dh_check_can_run("daemon-reload", DH_STORE_DIR);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_sighup_adds_a_host_and_keeps_the_others),
        DH_TEST(test_a_removed_host_is_retired_and_refuses),
        DH_TEST(test_memory_max_applies_to_the_running_leaf),
        DH_TEST(test_a_new_address_serves_the_next_generation),
        DH_TEST(test_exec_changes_wait_for_the_next_start),
        DH_TEST(test_a_broken_edit_changes_nothing),
        DH_TEST(test_box_cannot_change_but_budgets_can),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
