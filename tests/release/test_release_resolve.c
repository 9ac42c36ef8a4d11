/* rel_resolve and rel_promote with real files: tampering, pins, a promote or
 * a file swap after resolve, symlinks and unsafe modes. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "release/internal.h"
#include "release/release.h"
#include "tests/release/helpers.h"

/* Stages both test apps as v1 and v2 of web1 and makes v1 live. */
static void stage_two(rt_fixture *fx, rel_identity *v1, rel_identity *v2)
{
    act_error err = {0};
    if (rel_stage(fx->store, "web1", "v1", rt_app_v1, NULL, v1, &err) < 0)
        fail_msg("stage v1: %s", err.message);
    if (rel_stage(fx->store, "web1", "v2", rt_app_v2, NULL, v2, &err) < 0)
        fail_msg("stage v2: %s", err.message);
    if (rel_promote(fx->store, "web1", "v1", &err) < 0)
        fail_msg("promote v1: %s", err.message);
}

static void run_resolved(rel_resolved *resolved, const char *expected_output)
{
    char output[256];
    int status = rt_exec_fd(resolved->exec_fd, output, sizeof(output));
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_string_equal(output, expected_output);
}

static void flipped_byte_is_refused_with_both_digests(void **state)
{
    rt_fixture *fx = *state;
    rel_identity v1, v2;
    stage_two(fx, &v1, &v2);
    char *exec = rt_join(fx->releases, "web1/v1/rel-test-app-v1");
    rt_flip_byte(exec, 100);
    char actual[65];
    rt_sha256_file(exec, actual);

    act_error err = {0};
    rel_resolved resolved;
    assert_int_equal(rel_resolve(fx->store, "web1", NULL, NULL, &resolved, &err), -EBADMSG);
    assert_int_equal(resolved.exec_fd, -1);
    assert_non_null(strstr(err.message, "host web1"));
    assert_non_null(strstr(err.message, "version v1"));
    assert_non_null(strstr(err.message, v1.digest)); /* expected */
    assert_non_null(strstr(err.message, actual));
    assert_string_not_equal(actual, v1.digest);

    /* verify sees it too, and promote will not make it live again. */
    assert_int_equal(rel_verify(fx->store, "web1", "v1", &err), -EBADMSG);
    assert_non_null(strstr(err.message, actual));
    if (rel_promote(fx->store, "web1", "v2", &err) < 0)
        fail_msg("promote v2: %s", err.message);
    assert_int_equal(rel_promote(fx->store, "web1", "v1", &err), -EBADMSG);
    char live[REL_NAME_SIZE];
    assert_int_equal(rel_live_version(fx->store, "web1", live, &err), 0);
    assert_string_equal(live, "v2");
    free(exec);
}

static void pin_digest_must_match_the_build(void **state)
{
    rt_fixture *fx = *state;
    rel_identity v1, v2;
    stage_two(fx, &v1, &v2);
    act_error err = {0};
    rel_resolved resolved;

    /* A pin naming v2's version with v1's digest: refused, naming both. */
    rel_pin stale = {.version = "v2"};
    memcpy(stale.digest, v1.build_digest, sizeof(stale.digest));
    assert_int_equal(rel_resolve(fx->store, "web1", &stale, NULL, &resolved, &err), -EKEYREJECTED);
    assert_int_equal(resolved.exec_fd, -1);
    assert_non_null(strstr(err.message, "host web1"));
    assert_non_null(strstr(err.message, "version v2"));
    assert_non_null(strstr(err.message, v1.build_digest));
    assert_non_null(strstr(err.message, v2.build_digest));

    /* The executable's own digest is not a build digest: also refused. */
    rel_pin wrong_kind = {.version = "v2"};
    memcpy(wrong_kind.digest, v2.digest, sizeof(wrong_kind.digest));
    if (strcmp(v2.digest, v2.build_digest) != 0)
        assert_int_equal(rel_resolve(fx->store, "web1", &wrong_kind, NULL, &resolved, &err),
                         -EKEYREJECTED);

    /* The right pin runs v2 although live names v1. */
    rel_pin pin = {.version = "v2"};
    memcpy(pin.digest, v2.build_digest, sizeof(pin.digest));
    if (rel_resolve(fx->store, "web1", &pin, NULL, &resolved, &err) < 0)
        fail_msg("pinned resolve: %s", err.message);
    assert_string_equal(resolved.identity.version, "v2");
    run_resolved(&resolved, "rel-test-app 2.0\n");
    rel_resolved_release(&resolved);

    rel_pin malformed = {.version = "v2", .digest = "ABC"};
    assert_int_equal(rel_resolve(fx->store, "web1", &malformed, NULL, &resolved, &err), -EINVAL);
    assert_non_null(strstr(err.message, "digest"));
}

static void promote_after_resolve_does_not_change_what_runs(void **state)
{
    rt_fixture *fx = *state;
    rel_identity v1, v2;
    stage_two(fx, &v1, &v2);
    act_error err = {0};
    rel_resolved resolved;
    if (rel_resolve(fx->store, "web1", NULL, NULL, &resolved, &err) < 0)
        fail_msg("resolve: %s", err.message);
    assert_string_equal(resolved.identity.version, "v1");

    if (rel_promote(fx->store, "web1", "v2", &err) < 0)
        fail_msg("promote: %s", err.message);
    char live[REL_NAME_SIZE];
    assert_int_equal(rel_live_version(fx->store, "web1", live, &err), 0);
    assert_string_equal(live, "v2");
    run_resolved(&resolved, "rel-test-app 1.0\n");
    rel_resolved_release(&resolved);

    /* A fresh resolve follows the new live link. */
    if (rel_resolve(fx->store, "web1", NULL, NULL, &resolved, &err) < 0)
        fail_msg("resolve: %s", err.message);
    assert_string_equal(resolved.identity.version, "v2");
    run_resolved(&resolved, "rel-test-app 2.0\n");

    /* Swapping the file on disk after resolve cannot change what runs: the
     * fd still names the verified inode. */
    char *exec = rt_join(fx->releases, "web1/v2/rel-test-app-v2");
    char *replacement = rt_join(fx->releases, "web1/v2/.swap");
    rt_copy_file(rt_app_v1, replacement, 0555);
    assert_int_equal(rename(replacement, exec), 0);
    run_resolved(&resolved, "rel-test-app 2.0\n");
    rel_resolved_release(&resolved);
    /* ... while the next resolve sees the swapped file and refuses it. */
    assert_int_equal(rel_resolve(fx->store, "web1", NULL, NULL, &resolved, &err), -EBADMSG);
    free(replacement);
    free(exec);
}

static void symlinks_and_writable_files_are_refused(void **state)
{
    rt_fixture *fx = *state;
    rel_identity v1, v2;
    stage_two(fx, &v1, &v2);
    act_error err = {0};
    rel_resolved resolved;
    char *exec = rt_join(fx->releases, "web1/v1/rel-test-app-v1");
    char *moved = rt_join(fx->releases, "web1/v1/real-app");

    /* A symlink to an identical copy: same bytes, still refused. */
    assert_int_equal(rename(exec, moved), 0);
    assert_int_equal(symlink("real-app", exec), 0);
    assert_int_equal(rel_resolve(fx->store, "web1", NULL, NULL, &resolved, &err), -ELOOP);
    assert_non_null(strstr(err.message, "symlink"));
    assert_non_null(strstr(err.message, "rel-test-app-v1"));
    assert_int_equal(resolved.exec_fd, -1);
    assert_int_equal(rel_verify(fx->store, "web1", "v1", &err), -ELOOP);
    assert_int_equal(unlink(exec), 0);
    assert_int_equal(rename(moved, exec), 0);
    if (rel_resolve(fx->store, "web1", NULL, NULL, &resolved, &err) < 0)
        fail_msg("resolve after repair: %s", err.message);
    rel_resolved_release(&resolved);

    /* Group- or other-writable: refused even though the content matches. */
    assert_int_equal(chmod(exec, 0575), 0);
    assert_int_equal(rel_resolve(fx->store, "web1", NULL, NULL, &resolved, &err), -EPERM);
    assert_non_null(strstr(err.message, "writable by group"));
    assert_int_equal(chmod(exec, 0557), 0);
    assert_int_equal(rel_resolve(fx->store, "web1", NULL, NULL, &resolved, &err), -EPERM);
    assert_non_null(strstr(err.message, "writable by other"));
    assert_int_equal(chmod(exec, 0555), 0);

    /* A live link that leaves the host directory is not followed. */
    char *live = rt_join(fx->releases, "web1/live");
    assert_int_equal(unlink(live), 0);
    assert_int_equal(symlink("../other/v1", live), 0);
    assert_int_equal(rel_resolve(fx->store, "web1", NULL, NULL, &resolved, &err), -EUCLEAN);
    assert_non_null(strstr(err.message, "live"));
    assert_int_equal(unlink(live), 0);
    assert_int_equal(rel_resolve(fx->store, "web1", NULL, NULL, &resolved, &err), -ENOENT);
    assert_non_null(strstr(err.message, "no live version"));
    free(live);
    free(moved);
    free(exec);
}

static void symlinked_directory_in_the_build_path_is_refused(void **state)
{
    rt_fixture *fx = *state;
    char *src = rt_join(fx->tmp, "src");
    char *bin = rt_join(src, "bin");
    char *app = rt_join(bin, "app");
    assert_int_equal(mkdir(src, 0755), 0);
    assert_int_equal(mkdir(bin, 0755), 0);
    rt_copy_file(rt_app_v1, app, 0755);
    act_error err = {0};
    if (rel_stage(fx->store, "web1", "d1", src, "bin/app", NULL, &err) < 0)
        fail_msg("stage: %s", err.message);
    if (rel_promote(fx->store, "web1", "d1", &err) < 0)
        fail_msg("promote: %s", err.message);

    /* Replace bin/ by a symlink to an identical real directory. */
    char *staged_bin = rt_join(fx->releases, "web1/d1/bin");
    char *real_bin = rt_join(fx->releases, "web1/d1/real-bin");
    assert_int_equal(rename(staged_bin, real_bin), 0);
    assert_int_equal(symlink("real-bin", staged_bin), 0);
    rel_resolved resolved;
    assert_int_equal(rel_resolve(fx->store, "web1", NULL, NULL, &resolved, &err), -ELOOP);
    assert_non_null(strstr(err.message, "bin/app"));

    /* Both ways of opening beneath the build refuse it: openat2 and the
     * O_NOFOLLOW walk used on kernels without it. */
    char *version_dir = rt_join(fx->releases, "web1/d1");
    int dirfd = open(version_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(dirfd >= 0);
    assert_int_equal(rel_open_beneath(dirfd, "bin/app", O_RDONLY), -ELOOP);
    assert_int_equal(rel_open_beneath_walk(dirfd, "bin/app", O_RDONLY), -ELOOP);
    int fd = rel_open_beneath_walk(dirfd, "real-bin/app", O_RDONLY);
    assert_true(fd >= 0);
    close(fd);
    fd = rel_open_beneath(dirfd, "real-bin/app", O_RDONLY);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(rel_open_beneath_walk(dirfd, "../d1/real-bin/app", O_RDONLY), -EINVAL);
    assert_int_equal(rel_open_beneath(dirfd, "/etc/passwd", O_RDONLY), -EINVAL);
    char *file_link = rt_join(version_dir, "real-bin/link");
    assert_int_equal(symlink("app", file_link), 0);
    assert_int_equal(rel_open_beneath_walk(dirfd, "real-bin/link", O_RDONLY), -ELOOP);
    assert_int_equal(rel_open_beneath(dirfd, "real-bin/link", O_RDONLY), -ELOOP);
    close(dirfd);
    free(file_link);
    free(version_dir);
    free(real_bin);
    free(staged_bin);
    free(app);
    free(bin);
    free(src);
}

int main(int argc, char **argv)
{
    rt_parse_args(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(flipped_byte_is_refused_with_both_digests, rt_setup,
                                        rt_teardown),
        cmocka_unit_test_setup_teardown(pin_digest_must_match_the_build, rt_setup, rt_teardown),
        cmocka_unit_test_setup_teardown(promote_after_resolve_does_not_change_what_runs, rt_setup,
                                        rt_teardown),
        cmocka_unit_test_setup_teardown(symlinks_and_writable_files_are_refused, rt_setup,
                                        rt_teardown),
        cmocka_unit_test_setup_teardown(symlinked_directory_in_the_build_path_is_refused, rt_setup,
                                        rt_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
