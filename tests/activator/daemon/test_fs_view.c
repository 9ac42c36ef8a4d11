/* The filesystem a generation sees, through the real daemon: two hosts as
 * two unprivileged users, each in its view (the default). The app tries
 * what a tenant would (tests/apps/tries.h) and writes what came of it into
 * its state directory, which the test reads:
 *   - / is read-only (EROFS), its state directory and ReadWritePaths= are
 *     writable, its /tmp is its own (not the box's, not the other host's);
 *   - the daemon's runtime and state directories, the claims, the other
 *     host's state and every release but the build it runs (read-only)
 *     are not there;
 *   - /proc shows neither the other host's processes nor the daemon;
 *   - no cgroup.procs outside its leaf takes its pid, and it stays in it.
 * And bad ReadWritePaths= values: refused by --check-config on their line,
 * a missing path fails the wake naming it, "-" lets it be missing, and
 * FilesystemView=box shows the box as it is. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#ifndef DH_ACTIVATORD
#error "DH_ACTIVATORD must name the activatord executable"
#endif

#define UID_A 61001
#define UID_B 61002

/* The app's arguments: the actions go one per line into a file beside the
 * markers (its view keeps that directory), a host file's lines being too
 * short for them. */
static void tries_args(dh_daemon *d, const char *host, char *out, size_t size,
                       const char *const *actions)
{
    char path[PATH_MAX - 64];
    snprintf(path, sizeof(path), "%s/markers/tries-%s", d->drv.dir, host);
    FILE *f = fopen(path, "we");
    DH_CHECK(d, f, "cannot write %s: %s", path, strerror(errno));
    for (size_t i = 0; actions[i]; i++)
        fprintf(f, "%s\n", actions[i]);
    fclose(f);
    snprintf(out, size, "--try-out tries.txt --tries-from %s", path);
}

/* The report of the host's latest generation; malloc'd. */
static char *tries_of(dh_daemon *d, const char *host)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/hosts/%s/state/tries.txt", d->drv.state_dir, host);
    char *text = dh_read_text(path);
    DH_CHECK(d, text && strstr(text, "tries done\n"), "%s has no complete report: %s", path,
             text ? text : "(missing)");
    print_message("%s's report:\n%s", host, text);
    return text;
}

static void expect_line(dh_daemon *d, const char *report, const char *action, const char *result)
{
    char line[PATH_MAX + 128];
    snprintf(line, sizeof(line), "try %s: %s", action, result);
    DH_CHECK(d, strstr(report, line), "expected \"%s\" in the app's report:\n%s", line, report);
}

static void expect_refused(dh_daemon *d, const char *report, const char *action)
{
    char tried[PATH_MAX + 64], ok[PATH_MAX + 64];
    snprintf(tried, sizeof(tried), "try %s: ", action);
    snprintf(ok, sizeof(ok), "try %s: ok", action);
    DH_CHECK(d, strstr(report, tried) && !strstr(report, ok),
             "%s was not refused:\n%s", action, report);
}

/* True when pid is among the pids the "pids:" try listed. */
static bool lists_pid(const char *report, int64_t pid)
{
    const char *line = strstr(report, "try pids:: ok ");
    if (!line)
        return true;
    const char *end = strchr(line, '\n');
    char needle[32];
    snprintf(needle, sizeof(needle), " %" PRId64, pid);
    for (const char *p = strstr(line, needle); p && (!end || p < end); p = strstr(p + 1, needle))
        if (p[strlen(needle)] == ' ' || p[strlen(needle)] == '\n')
            return true;
    return false;
}

static void make_owned_dir(dh_daemon *d, const char *path, uid_t owner)
{
    DH_CHECK(d, mkdir(path, 0755) == 0 && chown(path, owner, owner) == 0, "mkdir %s: %s", path,
             strerror(errno));
}

static void test_two_hosts_each_in_its_view(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    char shared[PATH_MAX - 64], secret[PATH_MAX - 64];
    snprintf(shared, sizeof(shared), "%s/shared-a", d->drv.dir);
    make_owned_dir(d, shared, UID_A);

    /* Paths the app tries, as the box names them. */
    char etc[64], own[PATH_MAX], rw[PATH_MAX], tmp[64], control[PATH_MAX], events[PATH_MAX],
        releases[PATH_MAX], manifest[PATH_MAX], claims[PATH_MAX], other[PATH_MAX],
        own_build[PATH_MAX], other_build[PATH_MAX],
        hosts_dir[PATH_MAX], cg_escape_root[PATH_MAX], cg_sibling[PATH_MAX], not_listed[PATH_MAX];
    snprintf(etc, sizeof(etc), "write:/etc/act-isolation-%d", (int)getpid());
    snprintf(own, sizeof(own), "write:%s/hosts/a/state/own", d->drv.state_dir);
    snprintf(rw, sizeof(rw), "write:%s/f", shared);
    snprintf(tmp, sizeof(tmp), "write:/tmp/act-isolation-%d", (int)getpid());
    snprintf(control, sizeof(control), "read:%s/control.ipc", d->drv.runtime_dir);
    snprintf(events, sizeof(events), "read:%s/events.ipc", d->drv.runtime_dir);
    snprintf(releases, sizeof(releases), "list:%s/releases", d->drv.state_dir);
    snprintf(manifest, sizeof(manifest), "read:%s/releases/a/v1/manifest.json", d->drv.state_dir);
    snprintf(own_build, sizeof(own_build), "write:%s/releases/a/v1/manifest.json",
             d->drv.state_dir);
    snprintf(other_build, sizeof(other_build), "read:%s/releases/b/v1/manifest.json",
             d->drv.state_dir);
    snprintf(claims, sizeof(claims), "read:%s/claims/a.claim", d->drv.state_dir);
    snprintf(secret, sizeof(secret), "%s/hosts/b/state/secret", d->drv.state_dir);
    snprintf(other, sizeof(other), "read:%s", secret);
    snprintf(hosts_dir, sizeof(hosts_dir), "read:%s/b.conf", d->drv.hosts_dir);
    snprintf(cg_escape_root, sizeof(cg_escape_root), "cgjoin:%.4000s", d->drv.cgroup_path);
    snprintf(cg_sibling, sizeof(cg_sibling), "cgjoin:%.4000s/hosts/b/g-1", d->drv.cgroup_path);
    snprintf(not_listed, sizeof(not_listed), "write:%s/not-listed", d->drv.dir);
    const char *a_actions[] = {etc,       own,         rw,         tmp,       control,
                               events,    releases,    manifest,   own_build, other_build,
                               claims,    other,       hosts_dir,  cg_escape_root,
                               cg_sibling, not_listed, "pids:",    "cgroup:", NULL};
    char a_args[8192], b_args[512], a_lines[PATH_MAX + 128], b_lines[64];
    tries_args(d, "a", a_args, sizeof(a_args), a_actions);
    snprintf(a_lines, sizeof(a_lines), "User=%d\nReadWritePaths=%s\n", UID_A, shared);
    dh_write_app_host(d, "a", dh_free_port(), a_args, a_lines);
    dh_stage(d, "a", "v1", true, NULL);
    char read_tmp[80];
    snprintf(read_tmp, sizeof(read_tmp), "read:/tmp/act-isolation-%d", (int)getpid());
    const char *b_actions[] = {read_tmp, NULL};
    tries_args(d, "b", b_args, sizeof(b_args), b_actions);
    snprintf(b_lines, sizeof(b_lines), "User=%d\n", UID_B);
    int b_port = dh_free_port();
    dh_write_app_host(d, "b", b_port, b_args, b_lines);
    dh_stage(d, "b", "v1", true, NULL);
    dh_start(d, NULL);

    dh_wake(d, "a");
    char *report = tries_of(d, "a");
    expect_line(d, report, etc, "EROFS");
    expect_line(d, report, own, "ok");
    expect_line(d, report, rw, "ok");
    expect_line(d, report, tmp, "ok");
    expect_line(d, report, control, "ENOENT");
    expect_line(d, report, events, "ENOENT");
    /* Of the releases, only the build it runs, read-only. */
    expect_line(d, report, releases, "ok 1 entries");
    expect_line(d, report, manifest, "ok");
    expect_refused(d, report, own_build);
    expect_line(d, report, other_build, "ENOENT");
    expect_line(d, report, claims, "ENOENT");
    expect_line(d, report, other, "ENOENT");
    expect_line(d, report, hosts_dir, "ENOENT");
    expect_refused(d, report, cg_escape_root);
    expect_refused(d, report, cg_sibling);
    expect_refused(d, report, not_listed);
    DH_CHECK(d, !lists_pid(report, d->drv.pid), "host a sees the daemon (pid %d) in /proc:\n%s",
             (int)d->drv.pid, report);
    free(report);
    /* What it wrote in its own /tmp is not the box's. */
    DH_CHECK(d, access(tmp + strlen("write:"), F_OK) < 0, "%s is on the box", tmp + 6);
    DH_CHECK(d, access(etc + strlen("write:"), F_OK) < 0, "%s is on the box", etc + 6);

    /* b does not see a's /tmp; then b's secret is there on the box. */
    dh_wake(d, "b");
    FILE *f = fopen(secret, "we");
    DH_CHECK(d, f, "cannot write %s: %s", secret, strerror(errno));
    fclose(f);
    int64_t b_pid = dh_answer_pid(b_port);
    report = tries_of(d, "b");
    expect_line(d, report, read_tmp, "ENOENT");
    free(report);

    /* A second generation of a, while b serves: b's process is not in its
     * /proc, and every escape attempt failed again with b's leaf there. */
    dh_park(d, "a");
    dh_wake(d, "a");
    report = tries_of(d, "a");
    expect_line(d, report, other, "ENOENT");
    expect_refused(d, report, cg_sibling);
    DH_CHECK(d, !lists_pid(report, b_pid), "host a sees host b's pid %" PRId64 ":\n%s", b_pid,
             report);
    DH_CHECK(d, !lists_pid(report, d->drv.pid), "host a sees the daemon (pid %d):\n%s",
             (int)d->drv.pid, report);
    DH_CHECK(d, strstr(report, "try cgroup:: ok /") && strstr(report, "/hosts/a/g-2\n"),
             "host a's second generation is not in its leaf:\n%s", report);
    free(report);
    dh_stop_and_check_clean(d);
}

static int check_config(const char *path, char *out, size_t size)
{
    char *const argv[] = {(char *)DH_ACTIVATORD, (char *)"--check-config", (char *)"--config",
                          (char *)path, NULL};
    return dh_run(argv, out, size);
}

static void expect_reported(dh_daemon *d, const char *out, const char *host, unsigned line,
                            const char *key, const char *says)
{
    char where[PATH_MAX + 128];
    snprintf(where, sizeof(where), "%s/%s.conf:%u: %s: ", d->drv.hosts_dir, host, line, key);
    const char *found = strstr(out, where);
    DH_CHECK(d, found && strstr(found, says), "--check-config did not report \"%s...%s\":\n%s",
             where, says, out);
}

static void test_bad_read_write_paths_are_refused(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    dh_write_host(d, "rel", "[Host]\nExec=act-e2e-app\nReadWritePaths=srv/data\n");
    dh_write_host(d, "dots", "[Host]\nExec=act-e2e-app\nReadWritePaths=/srv/../etc\n");
    dh_write_host(d, "plus", "[Host]\nExec=act-e2e-app\nReadWritePaths=+/srv\n");
    dh_write_host(d, "root", "[Host]\nExec=act-e2e-app\nReadWritePaths=/\n");
    dh_write_host(d, "view", "[Host]\nExec=act-e2e-app\nFilesystemView=off\n");
    dh_write_host(d, "inside", "[Host]\nExec=act-e2e-app\nReadWritePaths=/srv %s/releases\n",
                  d->drv.state_dir);
    dh_write_host(d, "runtime", "[Host]\nExec=act-e2e-app\n\nReadWritePaths=%s\n",
                  d->drv.runtime_dir);
    char out[16384];
    int status = check_config(d->drv.config_path, out, sizeof(out));
    DH_CHECK(d, status != 0, "--check-config passed bad ReadWritePaths=:\n%s", out);
    expect_reported(d, out, "rel", 3, "ReadWritePaths", "not an absolute path");
    expect_reported(d, out, "dots", 3, "ReadWritePaths", ". or .. component");
    expect_reported(d, out, "plus", 3, "ReadWritePaths", "RootDirectory=");
    expect_reported(d, out, "root", 3, "ReadWritePaths", "the whole box");
    expect_reported(d, out, "view", 3, "FilesystemView", "use private");
    expect_reported(d, out, "inside", 3, "ReadWritePaths", "the daemon's state directory");
    expect_reported(d, out, "runtime", 4, "ReadWritePaths",
                    "the daemon's runtime directory");
}

static void test_missing_read_write_path_fails_the_wake(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    char missing[PATH_MAX], lines[PATH_MAX + 64];
    snprintf(missing, sizeof(missing), "%s/not-there", d->drv.dir);
    snprintf(lines, sizeof(lines), "ReadWritePaths=%s\nMaxStarts=1\n", missing);
    dh_write_app_host(d, "strict", dh_free_port(), NULL, lines);
    dh_stage(d, "strict", "v1", true, NULL);
    snprintf(lines, sizeof(lines), "ReadWritePaths=-%s\n", missing);
    dh_write_app_host(d, "lenient", dh_free_port(), NULL, lines);
    dh_stage(d, "lenient", "v1", true, NULL);
    /* The box's filesystem as the daemon sees it: its /proc too, where this
     * test's own root process is (a view's /proc shows only the host's own
     * user). The daemon's runtime directory is there too, but the host's
     * dynamic user may not enter it, so a read would say EACCES either way. */
    char daemon_proc[64], args[PATH_MAX + 64];
    snprintf(daemon_proc, sizeof(daemon_proc), "proc:%d", (int)getpid());
    const char *actions[] = {daemon_proc, NULL};
    tries_args(d, "boxed", args, sizeof(args), actions);
    dh_write_app_host(d, "boxed", dh_free_port(), args, "FilesystemView=box\n");
    dh_stage(d, "boxed", "v1", true, NULL);
    dh_start(d, NULL);

    json_object *reply = dh_wake_reply(d, "strict", 15000), *error = NULL;
    json_object_object_get_ex(reply, "error", &error);
    const char *text = error ? dh_json_str(error, "message") : "(no error)";
    DH_CHECK(d, !dh_reply_ok(reply) && strstr(text, missing) && strstr(text, "filesystem view"),
             "the wake of a host with a missing ReadWritePaths= did not fail naming it: %s",
             text);
    json_object_put(reply);
    dh_wake(d, "lenient");
    dh_wake(d, "boxed");
    char *report = tries_of(d, "boxed");
    expect_line(d, report, daemon_proc, "ok");
    free(report);
    dh_stop_and_check_clean(d);
}

int main(void)
{
    int r = dh_check_can_run("daemon-isolation", DH_STORE_DIR);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_two_hosts_each_in_its_view),
        DH_TEST(test_bad_read_write_paths_are_refused),
        DH_TEST(test_missing_read_write_path_fails_the_wake),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
