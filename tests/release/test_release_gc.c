/* rel_list and rel_gc with real files: gc keeps the live, pinned, held and
 * running versions and the newest ones, removes the rest and the leftovers
 * of crashed runs. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "release/release.h"
#include "tests/release/helpers.h"

/* Stages count versions v0..v<count-1> of web1, each with different bytes:
 * a directory holding the app and a file naming the version. */
static void stage_versions(rt_fixture *fx, int count)
{
    for (int i = 0; i < count; i++) {
        char name[32], dir[64];
        snprintf(name, sizeof(name), "v%d", i);
        snprintf(dir, sizeof(dir), "src-%d", i);
        char *src = rt_join(fx->tmp, dir);
        assert_int_equal(mkdir(src, 0755), 0);
        char *app = rt_join(src, "app");
        char *tag = rt_join(src, "tag");
        rt_copy_file(rt_app_v1, app, 0755);
        rt_write_file(tag, name, strlen(name), 0644);
        act_error err = {0};
        if (rel_stage(fx->store, "web1", name, src, "app", NULL, &err) < 0)
            fail_msg("stage %s: %s", name, err.message);
        free(tag);
        free(app);
        free(src);
    }
}

static bool version_exists(rt_fixture *fx, const char *version)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/web1/%s", fx->releases, version);
    return rt_exists(path);
}

static void list_shows_versions_digests_and_live(void **state)
{
    rt_fixture *fx = *state;
    stage_versions(fx, 3);
    act_error err = {0};
    if (rel_promote(fx->store, "web1", "v1", &err) < 0)
        fail_msg("promote: %s", err.message);

    rel_entry *entries = NULL;
    size_t n = 0;
    if (rel_list(fx->store, "web1", &entries, &n, &err) < 0)
        fail_msg("list: %s", err.message);
    assert_int_equal(n, 3);
    for (size_t i = 0; i < n; i++) {
        char expected[32];
        snprintf(expected, sizeof(expected), "v%zu", i);
        /* Oldest staged first. */
        assert_string_equal(entries[i].identity.version, expected);
        assert_true(entries[i].manifest_ok);
        assert_int_equal(entries[i].is_live, i == 1);
        assert_int_equal(strlen(entries[i].identity.build_digest), 64);
        assert_true(entries[i].identity.size > entries[i].identity.exec_size);
        if (i > 0)
            assert_true(entries[i].identity.staged_at >= entries[i - 1].identity.staged_at);
        if (i > 0)
            assert_string_not_equal(entries[i].identity.build_digest,
                                    entries[i - 1].identity.build_digest);
    }
    free(entries);

    /* A version with a broken manifest is listed with its problem. */
    char *manifest = rt_join(fx->releases, "web1/v2/manifest.json");
    assert_int_equal(chmod(manifest, 0644), 0);
    rt_write_file(manifest, "{", 1, 0444);
    if (rel_list(fx->store, "web1", &entries, &n, &err) < 0)
        fail_msg("list: %s", err.message);
    assert_int_equal(n, 3);
    bool found = false;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(entries[i].identity.version, "v2") == 0) {
            found = true;
            assert_false(entries[i].manifest_ok);
            assert_non_null(strstr(entries[i].problem, "manifest.json"));
        }
    }
    assert_true(found);
    free(entries);

    /* An unknown host simply has no versions. */
    assert_int_equal(rel_list(fx->store, "nobody", &entries, &n, &err), 0);
    assert_int_equal(n, 0);
    free(entries);
    free(manifest);
}

static void gc_keeps_live_pinned_running_and_newest(void **state)
{
    rt_fixture *fx = *state;
    stage_versions(fx, 7);
    act_error err = {0};
    if (rel_promote(fx->store, "web1", "v2", &err) < 0)
        fail_msg("promote: %s", err.message);

    /* Leftovers of a crashed stage and a crashed gc. */
    char *stale_staging = rt_join(fx->releases, "web1/.staging-v9-deadbeef");
    char *stale_trash = rt_join(fx->releases, "web1/.trash-v8-deadbeef");
    assert_int_equal(mkdir(stale_staging, 0700), 0);
    assert_int_equal(mkdir(stale_trash, 0700), 0);
    char *junk = rt_join(stale_trash, "partial");
    rt_write_file(junk, "x", 1, 0444);

    /* v0 is pinned, v4 is running (the caller says so), v2 is live, and the
     * newest one (v6) is kept by count. */
    const char *keep[] = {"v0", "v4"};
    size_t removed = 0;
    if (rel_gc(fx->store, "web1", keep, 2, 1, &removed, &err) < 0)
        fail_msg("gc: %s", err.message);
    assert_int_equal(removed, 3);
    assert_true(version_exists(fx, "v0"));
    assert_false(version_exists(fx, "v1"));
    assert_true(version_exists(fx, "v2"));
    assert_false(version_exists(fx, "v3"));
    assert_true(version_exists(fx, "v4"));
    assert_false(version_exists(fx, "v5"));
    assert_true(version_exists(fx, "v6"));
    assert_false(rt_exists(stale_staging));
    assert_false(rt_exists(stale_trash));
    char *host_dir = rt_join(fx->releases, "web1");
    assert_int_equal(rt_count_prefix(host_dir, ".trash-"), 0);

    /* Whatever survived still verifies and the live one still resolves. */
    const char *kept[] = {"v0", "v2", "v4", "v6"};
    for (size_t i = 0; i < 4; i++)
        if (rel_verify(fx->store, "web1", kept[i], &err) < 0)
            fail_msg("verify %s: %s", kept[i], err.message);
    rel_resolved resolved;
    if (rel_resolve(fx->store, "web1", NULL, NULL, &resolved, &err) < 0)
        fail_msg("resolve: %s", err.message);
    assert_string_equal(resolved.identity.version, "v2");
    rel_resolved_release(&resolved);

    /* With nothing named, only the live one stays. */
    if (rel_gc(fx->store, "web1", NULL, 0, 0, &removed, &err) < 0)
        fail_msg("gc: %s", err.message);
    assert_int_equal(removed, 3);
    assert_true(version_exists(fx, "v2"));
    rel_entry *entries = NULL;
    size_t n = 0;
    assert_int_equal(rel_list(fx->store, "web1", &entries, &n, &err), 0);
    assert_int_equal(n, 1);
    assert_true(entries[0].is_live);
    free(entries);

    /* An unknown host has nothing to collect. */
    assert_int_equal(rel_gc(fx->store, "nobody", NULL, 0, 0, &removed, &err), 0);
    assert_int_equal(removed, 0);
    free(host_dir);
    free(junk);
    free(stale_trash);
    free(stale_staging);
}

static void gc_refuses_when_live_link_is_damaged(void **state)
{
    rt_fixture *fx = *state;
    stage_versions(fx, 2);
    char *live = rt_join(fx->releases, "web1/live");
    assert_int_equal(symlink("../elsewhere", live), 0);
    act_error err = {0};
    size_t removed = 7;
    assert_int_equal(rel_gc(fx->store, "web1", NULL, 0, 0, &removed, &err), -EUCLEAN);
    assert_int_equal(removed, 0);
    assert_non_null(strstr(err.message, "live"));
    assert_true(version_exists(fx, "v0"));
    assert_true(version_exists(fx, "v1"));
    free(live);
}

int main(int argc, char **argv)
{
    rt_parse_args(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(list_shows_versions_digests_and_live, rt_setup,
                                        rt_teardown),
        cmocka_unit_test_setup_teardown(gc_keeps_live_pinned_running_and_newest, rt_setup,
                                        rt_teardown),
        cmocka_unit_test_setup_teardown(gc_refuses_when_live_link_is_damaged, rt_setup,
                                        rt_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
