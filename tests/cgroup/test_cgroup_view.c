/* cg_spawn with a filesystem view, against real mounts, cgroups and
 * processes: act-testapp runs inside a view as an unprivileged user and
 * tries what a tenant would (tests/apps/tries.h); the test reads what came
 * of each attempt. Also: no cgroup escape, with or without a view. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cgt.h"
#include "common/cleanup.h"

#ifndef ACT_TESTAPP
#error "ACT_TESTAPP must name the act-testapp executable"
#endif

/* The unprivileged user the apps run as: nobody. */
#define APP_UID 65534

/* A box in miniature under one temp dir: the daemon's state directory with
 * two hosts' state, its runtime directory with a control socket file and a
 * notify socket, and a directory a host may be given with ReadWritePaths=. */
typedef struct box {
    char base[64];
    char state[200];  /* <base>/state: hidden */
    char a_state[200]; /* <state>/hosts/a/state: kept, host a's own */
    char b_secret[200]; /* <state>/hosts/b/state/secret */
    char run[200];    /* <base>/run: hidden */
    char control[200]; /* <run>/control.ipc */
    char notify[200];  /* <run>/notify/a.1: passed, a bound socket */
    char rw[200];     /* <base>/rw: kept, ReadWritePaths= */
    int notify_fd;
} box;

static void make_dir(const char *path, uid_t owner)
{
    if (mkdir(path, 0755) < 0 && errno != EEXIST)
        fail_msg("mkdir %s: %s", path, strerror(errno));
    assert_int_equal(chown(path, owner, owner), 0);
}

static void make_file(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        fail_msg("create %s: %s", path, strerror(errno));
    close(fd);
}

static void make_box(box *b)
{
    /* Under /tmp on purpose: the view replaces /tmp, so what it keeps from
     * here must be bound back into the fresh one. */
    snprintf(b->base, sizeof(b->base), "/tmp/act-view-XXXXXX");
    assert_non_null(mkdtemp(b->base));
    chmod(b->base, 0755);
    char path[512];
    snprintf(b->state, sizeof(b->state), "%s/state", b->base);
    make_dir(b->state, 0);
    snprintf(path, sizeof(path), "%s/hosts", b->state);
    make_dir(path, 0);
    snprintf(path, sizeof(path), "%s/hosts/a", b->state);
    make_dir(path, 0);
    snprintf(b->a_state, sizeof(b->a_state), "%s/state/hosts/a/state", b->base);
    make_dir(b->a_state, APP_UID);
    snprintf(path, sizeof(path), "%s/hosts/b", b->state);
    make_dir(path, 0);
    snprintf(path, sizeof(path), "%s/hosts/b/state", b->state);
    make_dir(path, APP_UID);
    snprintf(b->b_secret, sizeof(b->b_secret), "%s/state/hosts/b/state/secret", b->base);
    make_file(b->b_secret);
    chown(b->b_secret, APP_UID, APP_UID);
    snprintf(b->run, sizeof(b->run), "%s/run", b->base);
    make_dir(b->run, 0);
    snprintf(b->control, sizeof(b->control), "%s/run/control.ipc", b->base);
    make_file(b->control);
    snprintf(path, sizeof(path), "%s/notify", b->run);
    make_dir(path, 0);
    snprintf(b->notify, sizeof(b->notify), "%s/run/notify/a.1", b->base);
    b->notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    assert_true(strlen(b->notify) < sizeof(address.sun_path));
    memcpy(address.sun_path, b->notify, strlen(b->notify) + 1);
    assert_int_equal(bind(b->notify_fd, (struct sockaddr *)&address, sizeof(address)), 0);
    chmod(b->notify, 0666);
    snprintf(b->rw, sizeof(b->rw), "%s/rw", b->base);
    make_dir(b->rw, APP_UID);
}

static void remove_box(box *b)
{
    close(b->notify_fd);
    char command[512];
    snprintf(command, sizeof(command), "rm -rf '%s'", b->base);
    assert_int_equal(system(command), 0);
}

static cg_fs_view *box_view(const box *b, const char *const *extra_writable,
                            const char *const *if_present)
{
    const char *writable[8] = {b->a_state, b->rw};
    for (size_t i = 0; extra_writable && extra_writable[i] && i < 5; i++)
        writable[2 + i] = extra_writable[i];
    const char *hidden[] = {b->state, b->run, NULL};
    cg_fs_view_spec spec = {
        .hidden = hidden,
        .writable = writable,
        .writable_if_present = if_present,
        .private_tmp = true,
        .hide_processes = true,
        .private_dev = true,
    };
    cg_fs_view *view = NULL;
    act_error err = {0};
    if (cg_fs_view_new(&spec, &view, &err) < 0)
        fail_msg("cg_fs_view_new: %s", err.message);
    return view;
}

typedef struct run_options {
    const cg_fs_view *view;
    const char *const *passed;
    const char *const *read_only;
    uid_t uid;
} run_options;

static void tweak(cg_spawn_spec *spec, void *data)
{
    const run_options *o = data;
    static const char *const envp[] = {"ASAN_OPTIONS=detect_leaks=0", NULL};
    spec->envp = envp;
    spec->fs_view = o->view;
    spec->fs_passed = o->passed;
    spec->fs_read_only = o->read_only;
    if (o->uid) {
        spec->uid = o->uid;
        spec->gid = o->uid;
        spec->no_new_privs = true;
    }
}

/* Runs act-testapp --tries-only with actions in leaf; returns its report,
 * or NULL with err set when the spawn failed. With keep_pid, the app stays
 * (it serves on a socket of its own) and *pid names it. */
static char *run_tries(cg_leaf *leaf, const run_options *o, const char *const *actions,
                       act_error *err)
{
    const char *args[40];
    size_t n = 0;
    for (size_t i = 0; actions[i] && n < 36; i++) {
        args[n++] = "--try";
        args[n++] = actions[i];
    }
    args[n++] = "--tries-only";
    args[n] = NULL;
    cg_process proc;
    int out = -1;
    int r = cgt_spawn(leaf, ACT_TESTAPP, args, tweak, (void *)o, &proc, &out, err);
    if (r < 0)
        return NULL;
    char *text = cgt_read_until(out, "tries done\n", 10000);
    close(out);
    siginfo_t info;
    cgt_reap(proc.pidfd, &info);
    return text;
}

static void expect(const char *report, const char *line)
{
    if (!strstr(report, line))
        fail_msg("expected \"%s\" in the app's report:\n%s", line, report);
}

/* The app's report says what trying action gave: "try ACTION: RESULT". */
static void expect_try(const char *report, const char *action, const char *result)
{
    char line[PATH_MAX + 64];
    snprintf(line, sizeof(line), "try %s: %s", action, result);
    expect(report, line);
}

static cg_leaf *leaf_of(void **state, const char *host, const char *name)
{
    return cgt_leaf(*state, host, name, NULL);
}

static void test_view_confines_the_filesystem(void **state)
{
    box b;
    make_box(&b);
    _cleanup_(cg_fs_view_freep) cg_fs_view *view = box_view(&b, NULL, NULL);
    const char *passed[] = {b.notify, NULL};
    run_options o = {.view = view, .passed = passed, .uid = APP_UID};
    char a_file[512], rw_file[512], tmp_file[64], run_list[512],
        control[512], secret[512], notify[512], releases[512];
    char proc_parent[32], etc_file[64];
    snprintf(a_file, sizeof(a_file), "write:%s/f", b.a_state);
    snprintf(rw_file, sizeof(rw_file), "write:%s/f", b.rw);
    snprintf(tmp_file, sizeof(tmp_file), "write:/tmp/act-view-%d", (int)getpid());
    snprintf(run_list, sizeof(run_list), "list:%s", b.run);
    snprintf(control, sizeof(control), "read:%s", b.control);
    snprintf(secret, sizeof(secret), "read:%s", b.b_secret);
    snprintf(notify, sizeof(notify), "connect:%s", b.notify);
    snprintf(releases, sizeof(releases), "list:%s/hosts", b.state);
    snprintf(proc_parent, sizeof(proc_parent), "proc:%d", (int)getpid());
    snprintf(etc_file, sizeof(etc_file), "write:/etc/act-view-%d", (int)getpid());
    const char *actions[] = {etc_file, a_file,  rw_file,    tmp_file, run_list,      control,
                             secret,   notify,  releases,   "proc:1", proc_parent,   "proc:self",
                             NULL};
    act_error err = {0};
    cg_leaf *leaf = leaf_of(state, "a", "g-1");
    _cleanup_free_ char *report = run_tries(leaf, &o, actions, &err);
    if (!report)
        fail_msg("spawn in a view: %s", err.message);
    expect_try(report, etc_file, "EROFS");
    expect_try(report, a_file, "ok");
    expect_try(report, rw_file, "ok");
    expect_try(report, tmp_file, "ok");
    /* The runtime directory shows only the way to the notify socket. */
    expect_try(report, run_list, "ok 1 entries");
    expect_try(report, control, "ENOENT");
    expect_try(report, secret, "ENOENT");
    expect_try(report, notify, "ok");
    /* Of the hosts' directories, only a's own. */
    expect_try(report, releases, "ok 1 entries");
    expect_try(report, "proc:1", "ENOENT");
    expect_try(report, proc_parent, "ENOENT");
    expect_try(report, "proc:self", "ok");

    /* What it wrote where it may is there; its /tmp was its own. */
    char written[PATH_MAX + 64];
    snprintf(written, sizeof(written), "%s/f", b.a_state);
    assert_false(cgt_gone(written));
    assert_true(cgt_gone(tmp_file + strlen("write:")));
    assert_true(cgt_gone(etc_file + strlen("write:")));

    /* A second generation (another host) does not see the first one's /tmp. */
    char read_tmp[80];
    snprintf(read_tmp, sizeof(read_tmp), "read:%s", tmp_file + strlen("write:"));
    const char *second[] = {read_tmp, NULL};
    cg_leaf *other = leaf_of(state, "b", "g-1");
    _cleanup_free_ char *report2 = run_tries(other, &o, second, &err);
    if (!report2)
        fail_msg("second spawn in a view: %s", err.message);
    expect_try(report2, read_tmp, "ENOENT");
    assert_int_equal(cg_leaf_remove(other, &err), 0);
    cg_leaf_free(other);
    assert_int_equal(cg_leaf_remove(leaf, &err), 0);
    cg_leaf_free(leaf);
    remove_box(&b);
}

/* Root in a view: / is read-only to it as well (EROFS, not EACCES), and
 * so is a path passed read-only (its build), whose siblings stay hidden. */
static void test_view_is_read_only_for_root(void **state)
{
    box b;
    make_box(&b);
    _cleanup_(cg_fs_view_freep) cg_fs_view *view = box_view(&b, NULL, NULL);
    char build[300], other_build[300], build_file[320];
    snprintf(build, sizeof(build), "%s/releases", b.state);
    make_dir(build, 0);
    snprintf(build, sizeof(build), "%s/releases/v1", b.state);
    make_dir(build, 0);
    snprintf(other_build, sizeof(other_build), "%s/releases/v0", b.state);
    make_dir(other_build, 0);
    snprintf(build_file, sizeof(build_file), "%s/app", build);
    make_file(build_file);
    const char *read_only[] = {build, NULL};
    run_options o = {.view = view, .read_only = read_only};
    char etc_file[64], a_file[512], read_build[340], write_build[340], list_other[340];
    snprintf(etc_file, sizeof(etc_file), "write:/etc/act-view-%d", (int)getpid());
    snprintf(a_file, sizeof(a_file), "write:%s/root-file", b.a_state);
    snprintf(read_build, sizeof(read_build), "read:%s", build_file);
    snprintf(write_build, sizeof(write_build), "write:%s", build_file);
    snprintf(list_other, sizeof(list_other), "list:%s", other_build);
    const char *actions[] = {etc_file, a_file, read_build, write_build, list_other, NULL};
    act_error err = {0};
    cg_leaf *leaf = leaf_of(state, "a", "g-2");
    _cleanup_free_ char *report = run_tries(leaf, &o, actions, &err);
    if (!report)
        fail_msg("spawn in a view: %s", err.message);
    expect_try(report, etc_file, "EROFS");
    expect_try(report, a_file, "ok");
    expect_try(report, read_build, "ok");
    expect_try(report, write_build, "EROFS");
    expect_try(report, list_other, "ENOENT");
    assert_int_equal(cg_leaf_remove(leaf, &err), 0);
    cg_leaf_free(leaf);
    remove_box(&b);
}

/* What root, even with every capability, must not reach in a view, and
 * what every process needs there; with the same tries outside a view as
 * the control that shows the test could fail (opening for writing writes
 * nothing; a disk is opened only for reading). */
static const char *const kernel_tries[] = {"openw:/proc/sys/kernel/core_pattern",
                                           "openw:/proc/sysrq-trigger",
                                           "blockdev:/dev",
                                           "openw:/dev/null",
                                           "read:/dev/urandom",
                                           "read:/dev/ptmx",
                                           "read:/proc/meminfo",
                                           "read:/dev/kmsg",
                                           "write:/dev/act-view",
                                           "write:/dev/shm/act-view",
                                           NULL};

static void test_view_guards_the_kernel_and_devices(void **state)
{
    box b;
    make_box(&b);
    _cleanup_(cg_fs_view_freep) cg_fs_view *view = box_view(&b, NULL, NULL);
    run_options o = {.view = view};
    act_error err = {0};
    cg_leaf *leaf = leaf_of(state, "a", "g-3");
    _cleanup_free_ char *report = run_tries(leaf, &o, kernel_tries, &err);
    if (!report)
        fail_msg("spawn in a view: %s", err.message);
    expect_try(report, "openw:/proc/sys/kernel/core_pattern", "EROFS");
    /* A kernel built without the magic SysRq key has no file to guard. */
    bool sysrq = access("/proc/sysrq-trigger", F_OK) == 0;
    expect_try(report, "openw:/proc/sysrq-trigger", sysrq ? "EROFS" : "ENOENT");
    expect_try(report, "blockdev:/dev", "ENOENT");
    expect_try(report, "openw:/dev/null", "ok");
    expect_try(report, "read:/dev/urandom", "ok");
    expect_try(report, "read:/dev/ptmx", "ok");
    expect_try(report, "read:/proc/meminfo", "ok");
    expect_try(report, "write:/dev/act-view", "EROFS");
    expect_try(report, "write:/dev/shm/act-view", "ok");
    expect_try(report, "read:/dev/kmsg", "ENOENT");

    /* A device named writable is bound back into the private /dev. */
    const char *const device[] = {"/dev/kmsg", NULL};
    _cleanup_(cg_fs_view_freep) cg_fs_view *with_device = box_view(&b, device, NULL);
    run_options o_device = {.view = with_device};
    _cleanup_free_ char *bound = run_tries(leaf, &o_device, kernel_tries, &err);
    if (!bound)
        fail_msg("spawn in a view with /dev/kmsg: %s", err.message);
    expect_try(bound, "read:/dev/kmsg", "ok");
    expect_try(bound, "blockdev:/dev", "ENOENT");

    /* The control: the box's own /proc and /dev let root through. */
    run_options box_wide = {0};
    _cleanup_free_ char *control = run_tries(leaf, &box_wide, kernel_tries, &err);
    if (!control)
        fail_msg("spawn without a view: %s", err.message);
    expect_try(control, "openw:/proc/sys/kernel/core_pattern", "ok");
    expect_try(control, "openw:/proc/sysrq-trigger", sysrq ? "ok" : "ENOENT");
    if (!strstr(control, "try blockdev:/dev: ENOENT"))
        expect_try(control, "blockdev:/dev", "ok");
    else
        print_message("this box's /dev has no block device; that control is untried\n");
    assert_int_equal(cg_leaf_remove(leaf, &err), 0);
    cg_leaf_free(leaf);
    remove_box(&b);
}

static void test_view_missing_writable_path(void **state)
{
    box b;
    make_box(&b);
    char missing[512];
    snprintf(missing, sizeof(missing), "%s/not-there", b.base);
    const char *writable[] = {missing, NULL};
    cg_fs_view *view = box_view(&b, writable, NULL);
    run_options o = {.view = view, .uid = APP_UID};
    const char *actions[] = {"proc:self", NULL};
    act_error err = {0};
    cg_leaf *leaf = leaf_of(state, "a", "g-3");
    char *report = run_tries(leaf, &o, actions, &err);
    assert_null(report);
    if (!strstr(err.message, "cannot set up its filesystem view at") ||
        !strstr(err.message, missing) || !strstr(err.message, "No such file or directory"))
        fail_msg("the failure does not name the missing path: %s", err.message);
    cg_fs_view_free(view);

    /* The same path as one kept only if present: skipped. */
    const char *if_present[] = {missing, NULL};
    view = box_view(&b, NULL, if_present);
    o.view = view;
    report = run_tries(leaf, &o, actions, &err);
    if (!report)
        fail_msg("a missing if-present path failed the spawn: %s", err.message);
    expect_try(report, "proc:self", "ok");
    free(report);
    cg_fs_view_free(view);
    assert_int_equal(cg_leaf_remove(leaf, &err), 0);
    cg_leaf_free(leaf);
    remove_box(&b);
}

/* A kept path reached through a symlink (one its host may have put in a
 * directory it writes) is never followed: the spawn fails, saying so. */
static void test_view_follows_no_symlink(void **state)
{
    box b;
    make_box(&b);
    char link[300], through[300];
    snprintf(link, sizeof(link), "%s/link", b.rw);
    assert_int_equal(symlink("/etc", link), 0);
    snprintf(through, sizeof(through), "%s/link", b.rw);
    const char *writable[] = {through, NULL};
    _cleanup_(cg_fs_view_freep) cg_fs_view *view = box_view(&b, writable, NULL);
    run_options o = {.view = view};
    const char *actions[] = {"proc:self", NULL};
    act_error err = {0};
    cg_leaf *leaf = leaf_of(state, "a", "g-4");
    char *report = run_tries(leaf, &o, actions, &err);
    assert_null(report);
    if (!strstr(err.message, through) || !strstr(err.message, "symlink"))
        fail_msg("the failure does not name the symlink: %s", err.message);
    assert_int_equal(cg_leaf_remove(leaf, &err), 0);
    cg_leaf_free(leaf);
    remove_box(&b);
}

static void test_view_refuses_bad_paths(void **state)
{
    (void)state;
    static const char *const bad[][2] = {
        {"relative/path", "not an absolute path"},
        {"/srv/../etc", "has a . or .. component"},
        {"/", "the whole box"},
        {"/proc/sys", "beneath /proc"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *writable[] = {bad[i][0], NULL};
        cg_fs_view_spec spec = {.writable = writable};
        cg_fs_view *view = NULL;
        act_error err = {0};
        assert_int_equal(cg_fs_view_new(&spec, &view, &err), -EINVAL);
        assert_null(view);
        if (!strstr(err.message, bad[i][1]))
            fail_msg("%s: \"%s\" does not say \"%s\"", bad[i][0], err.message, bad[i][1]);
    }
}

/* The escape attempts of a tenant, from inside its leaf: into the root's
 * cgroup.procs, a sibling's, the v1 hierarchies' roots; cgroup.kill and
 * cgroup.freeze of a sibling. Every one fails, and the app stays in its
 * leaf. Run with and without a view: the leaf and its parents belong to
 * root, so an unprivileged user may write none of them either way. */
static void check_no_escape(void **state, bool with_view)
{
    box b;
    make_box(&b);
    _cleanup_(cg_fs_view_freep) cg_fs_view *view = with_view ? box_view(&b, NULL, NULL) : NULL;
    run_options o = {.view = view, .uid = APP_UID};
    cg_leaf *sibling = leaf_of(state, "b", with_view ? "g-5" : "g-6");
    cg_leaf *leaf = leaf_of(state, "a", with_view ? "g-5" : "g-6");
    /* The v2 root of the box (its mount) and of the subtree, a sibling
     * leaf, and each v1 hierarchy the leaf is in. */
    char actions_text[16][PATH_MAX + 32];
    const char *actions[17];
    size_t n = 0;
    const char *leaf_path = cg_leaf_path(leaf);
    const char *rel = cg_leaf_relative_path(leaf);
    size_t mount_len = strlen(leaf_path) - strlen(rel) - 1;
    snprintf(actions_text[n++], sizeof(actions_text[0]), "cgjoin:%.*s", (int)mount_len, leaf_path);
    snprintf(actions_text[n++], sizeof(actions_text[0]), "cgjoin:%s", cg_root_path(*state));
    snprintf(actions_text[n++], sizeof(actions_text[0]), "cgjoin:%s", cg_leaf_path(sibling));
    snprintf(actions_text[n++], sizeof(actions_text[0]), "cgwrite:%s/cgroup.kill=1",
             cg_leaf_path(sibling));
    snprintf(actions_text[n++], sizeof(actions_text[0]), "cgwrite:%s/cgroup.freeze=1",
             cg_leaf_path(sibling));
    snprintf(actions_text[n++], sizeof(actions_text[0]), "cgwrite:%s/cgroup.subtree_control=+pids",
             leaf_path);
    static const char *const controllers[] = {"memory", "pids", "cpu"};
    for (size_t c = 0; c < 3; c++) {
        const char *v1 = cg_leaf_v1_path(leaf, controllers[c]);
        const char *v1_rel = v1 ? strstr(v1, rel) : NULL;
        if (!v1_rel)
            continue;
        snprintf(actions_text[n++], sizeof(actions_text[0]), "cgjoin:%.*s",
                 (int)(v1_rel - v1 - 1), v1);
        snprintf(actions_text[n++], sizeof(actions_text[0]), "cgjoin:%s/..", v1);
    }
    for (size_t i = 0; i < n; i++)
        actions[i] = actions_text[i];
    actions[n] = NULL;
    const char *args[40];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        args[k++] = "--try";
        args[k++] = actions[i];
    }
    args[k++] = "--try";
    args[k++] = "cgroup:";
    /* It stays, serving on a socket in a place it may write. */
    char socket_path[300];
    snprintf(socket_path, sizeof(socket_path), "%s/app.sock", b.rw);
    args[k++] = "--listen";
    args[k++] = socket_path;
    args[k] = NULL;
    cg_process proc;
    int out = -1;
    act_error err = {0};
    if (cgt_spawn(leaf, ACT_TESTAPP, args, tweak, &o, &proc, &out, &err) < 0)
        fail_msg("spawn: %s", err.message);
    _cleanup_free_ char *report = cgt_read_until(out, "tries done\n", 10000);
    close(out);
    for (size_t i = 0; i < n; i++) {
        char ok[PATH_MAX + 64];
        snprintf(ok, sizeof(ok), "try %s: ok", actions[i]);
        char tried[PATH_MAX + 64];
        snprintf(tried, sizeof(tried), "try %s: ", actions[i]);
        if (strstr(report, ok) || !strstr(report, tried))
            fail_msg("escape attempt %s was not refused:\n%s", actions[i], report);
    }
    char where[PATH_MAX + 64];
    snprintf(where, sizeof(where), "try cgroup:: ok /%s\n", rel);
    expect(report, where);
    /* Still there, and only there, after every attempt. */
    assert_true(cgt_pid_in_cgroup(leaf_path, proc.pid));
    for (size_t c = 0; c < 3; c++)
        if (cg_leaf_v1_path(leaf, controllers[c]))
            assert_true(cgt_pid_in_cgroup(cg_leaf_v1_path(leaf, controllers[c]), proc.pid));
    assert_int_equal(cg_leaf_kill_and_wait(leaf, 5000000, &err), 0);
    siginfo_t info;
    cgt_reap(proc.pidfd, &info);
    assert_int_equal(cg_leaf_remove(leaf, &err), 0);
    cg_leaf_free(leaf);
    assert_int_equal(cg_leaf_remove(sibling, &err), 0);
    cg_leaf_free(sibling);
    remove_box(&b);
}

static void test_no_cgroup_escape_in_a_view(void **state)
{
    check_no_escape(state, true);
}

static void test_no_cgroup_escape_without_a_view(void **state)
{
    check_no_escape(state, false);
}

int main(void)
{
    int r = cgt_check_can_run("cgroup-view");
    if (r)
        return r;
    printf("spawn method: %s\n", cgt_spawn_method_name());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_view_confines_the_filesystem, cgt_setup_root,
                                        cgt_teardown_root),
        cmocka_unit_test_setup_teardown(test_view_is_read_only_for_root, cgt_setup_root,
                                        cgt_teardown_root),
        cmocka_unit_test_setup_teardown(test_view_guards_the_kernel_and_devices, cgt_setup_root,
                                        cgt_teardown_root),
        cmocka_unit_test_setup_teardown(test_view_missing_writable_path, cgt_setup_root,
                                        cgt_teardown_root),
        cmocka_unit_test_setup_teardown(test_view_follows_no_symlink, cgt_setup_root,
                                        cgt_teardown_root),
        cmocka_unit_test(test_view_refuses_bad_paths),
        cmocka_unit_test_setup_teardown(test_no_cgroup_escape_in_a_view, cgt_setup_root,
                                        cgt_teardown_root),
        cmocka_unit_test_setup_teardown(test_no_cgroup_escape_without_a_view, cgt_setup_root,
                                        cgt_teardown_root),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
