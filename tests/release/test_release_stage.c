/* rel_stage with real files: a staged build execs from its resolved fd,
 * directory builds, idempotence, refusal of different content, and a stage
 * killed midway. */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "release/release.h"
#include "tests/release/helpers.h"

static void stage_resolve_exec_prints_version(void **state)
{
    rt_fixture *fx = *state;
    act_error err = {0};
    rel_identity staged;
    if (rel_stage(fx->store, "web1", "v1", rt_app_v1, NULL, &staged, &err) < 0)
        fail_msg("stage: %s", err.message);
    assert_string_equal(staged.version, "v1");
    assert_string_equal(staged.exec_path, "rel-test-app-v1");
    char expected[65];
    rt_sha256_file(rt_app_v1, expected);
    assert_string_equal(staged.digest, expected);
    assert_true(staged.staged_at > 0);
    struct stat st;
    assert_int_equal(stat(rt_app_v1, &st), 0);
    assert_int_equal(staged.size, (uint64_t)st.st_size);
    assert_int_equal(staged.exec_size, (uint64_t)st.st_size);

    if (rel_promote(fx->store, "web1", "v1", &err) < 0)
        fail_msg("promote: %s", err.message);
    rel_resolved resolved;
    if (rel_resolve(fx->store, "web1", NULL, NULL, &resolved, &err) < 0)
        fail_msg("resolve: %s", err.message);
    assert_string_equal(resolved.identity.build_digest, staged.build_digest);
    assert_string_equal(resolved.identity.digest, expected);
    /* The fd is close-on-exec, so the app cannot inherit it. */
    assert_true(fcntl(resolved.exec_fd, F_GETFD) & FD_CLOEXEC);

    char output[256];
    int status = rt_exec_fd(resolved.exec_fd, output, sizeof(output));
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_string_equal(output, "rel-test-app 1.0\n");
    rel_resolved_release(&resolved);
    assert_int_equal(resolved.exec_fd, -1);
    rel_resolved_release(&resolved);
}

/* One entry of a build as release.h's digest encoding spells it. */
typedef struct digest_entry {
    const char *path;
    const char *kind;    /* "f0444", "d0755", "l0777" */
    const char *payload; /* a file's SHA-256, a symlink's target, "" for a directory */
} digest_entry;

/* The build digest as release.h defines it (format 2), computed here
 * independently. */
static void expected_build_digest(const digest_entry *entries, size_t n, char out[65])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    assert_non_null(ctx);
    assert_int_equal(EVP_DigestInit_ex(ctx, EVP_sha256(), NULL), 1);
    for (size_t i = 0; i < n; i++) {
        EVP_DigestUpdate(ctx, entries[i].path, strlen(entries[i].path) + 1); /* with its NUL */
        EVP_DigestUpdate(ctx, entries[i].kind, strlen(entries[i].kind) + 1);
        EVP_DigestUpdate(ctx, entries[i].payload, strlen(entries[i].payload));
        EVP_DigestUpdate(ctx, "\n", 1);
    }
    unsigned char md[32];
    unsigned int len = 0;
    assert_int_equal(EVP_DigestFinal_ex(ctx, md, &len), 1);
    EVP_MD_CTX_free(ctx);
    for (unsigned i = 0; i < 32; i++)
        sprintf(out + 2 * i, "%02x", md[i]);
}

static void directory_build_execs_and_digest_follows_header(void **state)
{
    rt_fixture *fx = *state;
    char *src = rt_join(fx->tmp, "src");
    char *bin = rt_join(src, "bin");
    char *share = rt_join(src, "share");
    char *empty = rt_join(src, "empty");
    assert_int_equal(mkdir(src, 0755), 0);
    assert_int_equal(mkdir(bin, 0755), 0);
    assert_int_equal(mkdir(share, 0755), 0);
    assert_int_equal(mkdir(empty, 0755), 0);
    char *app = rt_join(bin, "app");
    char *data = rt_join(share, "data.txt");
    char *readme = rt_join(src, "README");
    rt_copy_file(rt_app_v2, app, 0755);
    rt_write_file(data, "payload\n", 8, 0644);
    rt_write_file(readme, "", 0, 0644);

    act_error err = {0};
    rel_identity staged;
    if (rel_stage(fx->store, "web1", "2.0", src, "bin/app", &staged, &err) < 0)
        fail_msg("stage: %s", err.message);
    assert_string_equal(staged.exec_path, "bin/app");

    /* Every entry in strcmp order, directories (the empty one too) with
     * their mode: "README" < "bin" < "bin/app" < "empty" < "share" < ... */
    char digests[3][65];
    rt_sha256_file(readme, digests[0]);
    rt_sha256_file(app, digests[1]);
    rt_sha256_file(data, digests[2]);
    const digest_entry entries[] = {
        {"README", "f0444", digests[0]},  {"bin", "d0755", ""},
        {"bin/app", "f0555", digests[1]}, {"empty", "d0755", ""},
        {"share", "d0755", ""},           {"share/data.txt", "f0444", digests[2]},
    };
    char build[65];
    expected_build_digest(entries, sizeof(entries) / sizeof(entries[0]), build);
    assert_string_equal(staged.build_digest, build);
    assert_string_equal(staged.digest, digests[1]);
    char real_src[PATH_MAX];
    assert_non_null(realpath(src, real_src));
    assert_string_equal(staged.source, real_src);

    /* Staged files are read-only and not writable by group or other. */
    char *staged_app = rt_join(fx->releases, "web1/2.0/bin/app");
    char *staged_data = rt_join(fx->releases, "web1/2.0/share/data.txt");
    char *staged_empty = rt_join(fx->releases, "web1/2.0/empty");
    struct stat st;
    assert_int_equal(stat(staged_app, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0555);
    assert_int_equal(stat(staged_data, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0444);
    assert_true(rt_exists(staged_empty));

    if (rel_verify(fx->store, "web1", "2.0", &err) < 0)
        fail_msg("verify: %s", err.message);
    rt_promote_and_expect_output(fx, "web1", "2.0", "rel-test-app 2.0\n");
    rel_resolved resolved;

    /* An override must name a file of the build and is hashed like the
     * default executable; data.txt is listed but not executable. */
    assert_int_equal(rel_resolve(fx->store, "web1", NULL, "share/data.txt", &resolved, &err),
                     -EPERM);
    assert_non_null(strstr(err.message, "execute permission"));
    assert_int_equal(rel_resolve(fx->store, "web1", NULL, "bin/other", &resolved, &err), -ENOENT);
    assert_non_null(strstr(err.message, "bin/other"));
    assert_int_equal(resolved.exec_fd, -1);

    free(staged_app);
    free(staged_data);
    free(staged_empty);
    free(app);
    free(data);
    free(readme);
    free(empty);
    free(share);
    free(bin);
    free(src);
}

static void same_content_is_noop_different_is_refused(void **state)
{
    rt_fixture *fx = *state;
    act_error err = {0};
    rel_identity first, again;
    if (rel_stage(fx->store, "web1", "v1", rt_app_v1, NULL, &first, &err) < 0)
        fail_msg("stage: %s", err.message);
    if (rel_stage(fx->store, "web1", "v1", rt_app_v1, NULL, &again, &err) < 0)
        fail_msg("restage of the same content: %s", err.message);
    assert_string_equal(again.build_digest, first.build_digest);
    /* A no-op: the existing build stays, with its original stamp. */
    assert_int_equal(again.staged_at, first.staged_at);

    /* Same file name, different bytes. */
    char *other_dir = rt_join(fx->tmp, "other");
    assert_int_equal(mkdir(other_dir, 0755), 0);
    char *impostor = rt_join(other_dir, "rel-test-app-v1");
    rt_copy_file(rt_app_v2, impostor, 0755);
    rel_identity refused;
    assert_int_equal(rel_stage(fx->store, "web1", "v1", impostor, NULL, &refused, &err), -EEXIST);
    assert_non_null(strstr(err.message, "web1"));
    assert_non_null(strstr(err.message, "v1"));
    assert_non_null(strstr(err.message, first.build_digest));

    /* Nothing changed: the original still verifies and still runs. */
    if (rel_verify(fx->store, "web1", "v1", &err) < 0)
        fail_msg("verify after refusal: %s", err.message);
    rel_pin pin = {.version = "v1"};
    memcpy(pin.digest, first.build_digest, sizeof(pin.digest));
    rel_resolved resolved;
    if (rel_resolve(fx->store, "web1", &pin, NULL, &resolved, &err) < 0)
        fail_msg("resolve: %s", err.message);
    char output[256];
    rt_exec_fd(resolved.exec_fd, output, sizeof(output));
    assert_string_equal(output, "rel-test-app 1.0\n");
    rel_resolved_release(&resolved);
    char *host_dir = rt_join(fx->releases, "web1");
    assert_int_equal(rt_count_prefix(host_dir, ".staging-"), 0);
    free(host_dir);
    free(impostor);
    free(other_dir);
}

/* A fetch of a pinned build stages only the pin's digest: another tree is
 * refused before anything appears under the version. */
static void a_stage_expecting_a_digest_refuses_another_build(void **state)
{
    rt_fixture *fx = *state;
    act_error err = {0};
    rel_identity v1, v2;
    if (rel_stage(fx->store, "ref", "v1", rt_app_v1, NULL, &v1, &err) < 0 ||
        rel_stage(fx->store, "ref", "v2", rt_app_v2, NULL, &v2, &err) < 0)
        fail_msg("stage: %s", err.message);
    rel_identity got;
    assert_int_equal(rel_stage_expecting(fx->store, "web1", "v1", rt_app_v2, NULL, "docker://r/a",
                                         v1.build_digest, &got, &err),
                     -EKEYREJECTED);
    assert_non_null(strstr(err.message, v1.build_digest));
    assert_non_null(strstr(err.message, v2.build_digest));
    assert_non_null(strstr(err.message, "nothing was staged"));
    char *host_dir = rt_join(fx->releases, "web1");
    char *version_dir = rt_join(host_dir, "v1");
    assert_false(rt_exists(version_dir));
    assert_int_equal(rt_count_prefix(host_dir, ".staging-"), 0);
    if (rel_stage_expecting(fx->store, "web1", "v1", rt_app_v1, NULL, "docker://r/a",
                            v1.build_digest, &got, &err) < 0)
        fail_msg("stage of the expected build: %s", err.message);
    assert_string_equal(got.build_digest, v1.build_digest);
    assert_string_equal(got.source, "docker://r/a");
    free(version_dir);
    free(host_dir);
}

static void stage_killed_midway_leaves_nothing_and_retry_succeeds(void **state)
{
    rt_fixture *fx = *state;
    char *host_dir = rt_join(fx->releases, "web1");
    char *version_dir = rt_join(host_dir, "v1");

    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        rel_test_abort_after_bytes = 4096;
        act_error err = {0};
        rel_stage(fx->store, "web1", "v1", rt_app_v1, NULL, NULL, &err);
        _exit(0); /* reached only if the switch did not fire */
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGKILL);

    /* The crash left its staging directory behind, and nothing else. */
    assert_int_equal(rt_count_prefix(host_dir, ".staging-"), 1);
    assert_false(rt_exists(version_dir));
    act_error err = {0};
    rel_entry *entries = NULL;
    size_t n = 99;
    assert_int_equal(rel_list(fx->store, "web1", &entries, &n, &err), 0);
    assert_int_equal(n, 0);
    free(entries);
    rel_pin pin = {.version = "v1"};
    memset(pin.digest, 'a', 64);
    rel_resolved resolved;
    assert_int_equal(rel_resolve(fx->store, "web1", &pin, NULL, &resolved, &err), -ENOENT);
    assert_int_equal(rel_promote(fx->store, "web1", "v1", &err), -ENOENT);

    /* The retry succeeds and sweeps the crashed run's leftovers. */
    rel_identity staged;
    if (rel_stage(fx->store, "web1", "v1", rt_app_v1, NULL, &staged, &err) < 0)
        fail_msg("retry: %s", err.message);
    assert_int_equal(rt_count_prefix(host_dir, ".staging-"), 0);
    if (rel_verify(fx->store, "web1", "v1", &err) < 0)
        fail_msg("verify: %s", err.message);
    free(version_dir);
    free(host_dir);
}

static void stage_refuses_unsafe_sources_and_changes_nothing(void **state)
{
    rt_fixture *fx = *state;
    char *src = rt_join(fx->tmp, "src");
    assert_int_equal(mkdir(src, 0755), 0);
    char *app = rt_join(src, "app");
    rt_copy_file(rt_app_v1, app, 0755);
    char *link = rt_join(src, "lib.so");
    assert_int_equal(symlink("/etc/passwd", link), 0);
    char *host_dir = rt_join(fx->releases, "web1");
    char *version_dir = rt_join(host_dir, "v1");
    act_error err = {0};

    /* An absolute symlink would lead to the box's own file. */
    assert_int_equal(rel_stage(fx->store, "web1", "v1", src, "app", NULL, &err), -EXDEV);
    assert_non_null(strstr(err.message, "lib.so"));
    assert_non_null(strstr(err.message, "absolute"));
    assert_false(rt_exists(version_dir));
    assert_int_equal(rt_count_prefix(host_dir, ".staging-"), 0);
    assert_int_equal(unlink(link), 0);

    char *fifo = rt_join(src, "pipe");
    assert_int_equal(mkfifo(fifo, 0644), 0);
    assert_int_equal(rel_stage(fx->store, "web1", "v1", src, "app", NULL, &err), -EPERM);
    assert_non_null(strstr(err.message, "pipe"));
    /* Named as the source itself, a fifo is refused at once rather than
     * waited on for a writer. */
    assert_int_equal(rel_stage(fx->store, "web1", "v1", fifo, NULL, NULL, &err), -EPERM);
    assert_non_null(strstr(err.message, "neither a regular file nor a directory"));
    assert_int_equal(unlink(fifo), 0);

    char *manifest = rt_join(src, "manifest.json");
    rt_write_file(manifest, "{}", 2, 0644);
    assert_int_equal(rel_stage(fx->store, "web1", "v1", src, "app", NULL, &err), -EINVAL);
    assert_non_null(strstr(err.message, "manifest.json"));
    assert_int_equal(unlink(manifest), 0);

    assert_int_equal(rel_stage(fx->store, "web1", "v1", src, "missing", NULL, &err), -ENOENT);
    assert_non_null(strstr(err.message, "missing"));
    assert_int_equal(rel_stage(fx->store, "web1", "v1", src, NULL, NULL, &err), -EINVAL);
    assert_non_null(strstr(err.message, "exec_path"));
    assert_int_equal(rel_stage(fx->store, "web1", "v1", rt_app_v1, "app", NULL, &err), -EINVAL);
    assert_int_equal(rel_stage(fx->store, "web1", "v1", "/nonexistent/app", NULL, NULL, &err),
                     -ENOENT);
    assert_non_null(strstr(err.message, "/nonexistent/app"));

    assert_false(rt_exists(version_dir));
    assert_int_equal(rt_count_prefix(host_dir, ".staging-"), 0);

    /* And the clean source stages. */
    if (rel_stage(fx->store, "web1", "v1", src, "app", NULL, &err) < 0)
        fail_msg("stage: %s", err.message);
    assert_true(rt_exists(version_dir));
    free(manifest);
    free(fifo);
    free(version_dir);
    free(host_dir);
    free(link);
    free(app);
    free(src);
}

/* A source with the links an image is full of: symlinks that stay inside
 * (one through another, one whose target is missing) and a hard link. */
static char *make_linked_source(rt_fixture *fx)
{
    char *src = rt_join(fx->tmp, "linked");
    char *lib = rt_join(src, "lib");
    char *data = rt_join(src, "data");
    assert_int_equal(mkdir(src, 0755), 0);
    assert_int_equal(mkdir(lib, 0700), 0); /* staged 0755 whatever the source says */
    assert_int_equal(mkdir(data, 0755), 0);
    char *app = rt_join(src, "app");
    rt_copy_file(rt_app_v1, app, 0755);
    char *real = rt_join(lib, "libx.so.1");
    rt_write_file(real, "library\n", 8, 0600);
    char *so = rt_join(lib, "libx.so");
    assert_int_equal(symlink("libx.so.1", so), 0);
    char *up = rt_join(data, "lib");
    assert_int_equal(symlink("../lib/libx.so", up), 0);
    char *dangling = rt_join(data, "later");
    assert_int_equal(symlink("not-there/file", dangling), 0);
    char *hard = rt_join(src, "app-again");
    assert_int_equal(link(app, hard), 0);
    free(lib);
    free(data);
    free(app);
    free(real);
    free(so);
    free(up);
    free(dangling);
    free(hard);
    return src;
}

static void symlinks_that_stay_inside_and_hard_links_are_staged(void **state)
{
    rt_fixture *fx = *state;
    char *src = make_linked_source(fx);
    act_error err = {0};
    rel_identity staged;
    if (rel_stage(fx->store, "web1", "v1", src, "app", &staged, &err) < 0)
        fail_msg("stage: %s", err.message);

    char *version = rt_join(fx->releases, "web1/v1");
    char *so = rt_join(version, "lib/libx.so");
    char target[PATH_MAX];
    ssize_t n = readlink(so, target, sizeof(target) - 1);
    assert_true(n > 0);
    target[n] = '\0';
    assert_string_equal(target, "libx.so.1");
    /* The hard link is a file of its own in the build. */
    char *app = rt_join(version, "app"), *again = rt_join(version, "app-again");
    struct stat a, b;
    assert_int_equal(lstat(app, &a), 0);
    assert_int_equal(lstat(again, &b), 0);
    assert_true(S_ISREG(b.st_mode) && a.st_ino != b.st_ino);
    char *lib = rt_join(version, "lib");
    assert_int_equal(lstat(lib, &a), 0);
    assert_int_equal(a.st_mode & 07777, 0755);

    char app_digest[65], lib_digest[65];
    rt_sha256_file(app, app_digest);
    char *real = rt_join(version, "lib/libx.so.1");
    rt_sha256_file(real, lib_digest);
    const digest_entry entries[] = {
        {"app", "f0555", app_digest},
        {"app-again", "f0555", app_digest},
        {"data", "d0755", ""},
        {"data/later", "l0777", "not-there/file"},
        {"data/lib", "l0777", "../lib/libx.so"},
        {"lib", "d0755", ""},
        {"lib/libx.so", "l0777", "libx.so.1"},
        {"lib/libx.so.1", "f0444", lib_digest},
    };
    char build[65];
    expected_build_digest(entries, sizeof(entries) / sizeof(entries[0]), build);
    assert_string_equal(staged.build_digest, build);
    if (rel_verify(fx->store, "web1", "v1", &err) < 0)
        fail_msg("verify: %s", err.message);

    /* What changes after staging is found: a symlink led elsewhere, a
     * directory's mode. */
    assert_int_equal(unlink(so), 0);
    assert_int_equal(symlink("../app", so), 0);
    assert_int_equal(rel_verify(fx->store, "web1", "v1", &err), -EBADMSG);
    assert_non_null(strstr(err.message, "lib/libx.so leads to ../app"));
    assert_int_equal(unlink(so), 0);
    assert_int_equal(symlink("libx.so.1", so), 0);
    assert_int_equal(rel_verify(fx->store, "web1", "v1", &err), 0);
    assert_int_equal(chmod(lib, 0777), 0);
    assert_int_equal(rel_verify(fx->store, "web1", "v1", &err), -EBADMSG);
    assert_non_null(strstr(err.message, "mode 0777"));
    assert_int_equal(chmod(lib, 0755), 0);

    /* A symlink is not an executable, even to a file of the build. */
    assert_int_equal(rel_stage(fx->store, "web1", "v2", src, "data/lib", NULL, &err), -ENOENT);
    assert_non_null(strstr(err.message, "symlink"));
    if (rel_promote(fx->store, "web1", "v1", &err) < 0)
        fail_msg("promote: %s", err.message);
    rel_resolved resolved;
    assert_int_equal(rel_resolve(fx->store, "web1", NULL, "lib/libx.so", &resolved, &err), -ENOENT);
    assert_non_null(strstr(err.message, "a symlink"));
    free(real);
    free(lib);
    free(app);
    free(again);
    free(so);
    free(version);
    free(src);
}

/* Symlinks that lead out, directly or through another symlink, or in a
 * loop, and set-ID files: refused, nothing staged. */
static void symlinks_that_lead_out_and_set_id_files_are_refused(void **state)
{
    rt_fixture *fx = *state;
    char *src = rt_join(fx->tmp, "src");
    char *dir = rt_join(src, "d");
    assert_int_equal(mkdir(src, 0755), 0);
    assert_int_equal(mkdir(dir, 0755), 0);
    char *app = rt_join(src, "app");
    rt_copy_file(rt_app_v1, app, 0755);
    char *host_dir = rt_join(fx->releases, "web1");
    char *version_dir = rt_join(host_dir, "v1");
    act_error err = {0};

    char *out = rt_join(src, "out");
    assert_int_equal(symlink("../../etc/passwd", out), 0);
    assert_int_equal(rel_stage(fx->store, "web1", "v1", src, "app", NULL, &err), -EXDEV);
    assert_non_null(strstr(err.message, "out -> ../../etc/passwd leads out of the build"));
    assert_int_equal(unlink(out), 0);

    /* d/up is ".." (the build's root, inside); "d/up/.." from the root is
     * lexically inside but leads to the root's parent once d/up is
     * followed. */
    char *up = rt_join(dir, "up"), *through = rt_join(src, "through");
    assert_int_equal(symlink("..", up), 0);
    assert_int_equal(symlink("d/up/..", through), 0);
    assert_int_equal(rel_stage(fx->store, "web1", "v1", src, "app", NULL, &err), -EXDEV);
    assert_non_null(strstr(err.message, "through -> d/up/.."));
    assert_int_equal(unlink(through), 0);

    char *a = rt_join(src, "a"), *b = rt_join(src, "b");
    assert_int_equal(symlink("b", a), 0);
    assert_int_equal(symlink("a", b), 0);
    assert_int_equal(rel_stage(fx->store, "web1", "v1", src, "app", NULL, &err), -ELOOP);
    assert_int_equal(unlink(a), 0);
    assert_int_equal(unlink(b), 0);

    char *setuid_file = rt_join(src, "su");
    rt_copy_file(rt_app_v1, setuid_file, 0755);
    assert_int_equal(chmod(setuid_file, 04755), 0);
    assert_int_equal(rel_stage(fx->store, "web1", "v1", src, "app", NULL, &err), -EPERM);
    assert_non_null(strstr(err.message, "set-user-ID"));
    assert_int_equal(unlink(setuid_file), 0);

    assert_false(rt_exists(version_dir));
    assert_int_equal(rt_count_prefix(host_dir, ".staging-"), 0);
    /* d/up alone stays inside and stages. */
    if (rel_stage(fx->store, "web1", "v1", src, "app", NULL, &err) < 0)
        fail_msg("stage: %s", err.message);
    free(setuid_file);
    free(a);
    free(b);
    free(up);
    free(through);
    free(out);
    free(version_dir);
    free(host_dir);
    free(app);
    free(dir);
    free(src);
}

/* A build staged before manifest format 2 (files only, the old digest)
 * still verifies and resolves. */
static void a_format_1_manifest_is_still_read(void **state)
{
    rt_fixture *fx = *state;
    act_error err = {0};
    rel_identity staged;
    if (rel_stage(fx->store, "web1", "v1", rt_app_v1, NULL, &staged, &err) < 0)
        fail_msg("stage: %s", err.message);
    char *version = rt_join(fx->releases, "web1/v1");
    char *exec = rt_join(version, staged.exec_path);
    char digest[65];
    rt_sha256_file(exec, digest);
    /* Format 1's digest: "path NUL sha256 \n" for each file. */
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    assert_int_equal(EVP_DigestInit_ex(ctx, EVP_sha256(), NULL), 1);
    EVP_DigestUpdate(ctx, staged.exec_path, strlen(staged.exec_path) + 1);
    EVP_DigestUpdate(ctx, digest, 64);
    EVP_DigestUpdate(ctx, "\n", 1);
    unsigned char md[32];
    unsigned len = 0;
    assert_int_equal(EVP_DigestFinal_ex(ctx, md, &len), 1);
    EVP_MD_CTX_free(ctx);
    char build[65];
    for (unsigned i = 0; i < 32; i++)
        sprintf(build + 2 * i, "%02x", md[i]);
    char text[2048];
    snprintf(text, sizeof(text),
             "{\"format\":1,\"host\":\"web1\",\"version\":\"v1\",\"exec_path\":\"%s\","
             "\"build_digest\":\"%s\",\"staged_at\":1,\"files\":[{\"path\":\"%s\","
             "\"size\":%llu,\"sha256\":\"%s\"}]}",
             staged.exec_path, build, staged.exec_path, (unsigned long long)staged.exec_size,
             digest);
    char *manifest = rt_join(version, "manifest.json");
    assert_int_equal(unlink(manifest), 0);
    rt_write_file(manifest, text, strlen(text), 0444);
    if (rel_verify(fx->store, "web1", "v1", &err) < 0)
        fail_msg("verify: %s", err.message);
    rel_resolved resolved;
    rel_pin pin = {.version = "v1"};
    snprintf(pin.digest, sizeof(pin.digest), "%s", build);
    if (rel_resolve(fx->store, "web1", &pin, NULL, &resolved, &err) < 0)
        fail_msg("resolve: %s", err.message);
    assert_string_equal(resolved.identity.source, "");
    rel_resolved_release(&resolved);
    free(manifest);
    free(exec);
    free(version);
}

int main(int argc, char **argv)
{
    rt_parse_args(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(stage_resolve_exec_prints_version, rt_setup, rt_teardown),
        cmocka_unit_test_setup_teardown(directory_build_execs_and_digest_follows_header, rt_setup,
                                        rt_teardown),
        cmocka_unit_test_setup_teardown(same_content_is_noop_different_is_refused, rt_setup,
                                        rt_teardown),
        cmocka_unit_test_setup_teardown(stage_killed_midway_leaves_nothing_and_retry_succeeds,
                                        rt_setup, rt_teardown),
        cmocka_unit_test_setup_teardown(symlinks_that_stay_inside_and_hard_links_are_staged,
                                        rt_setup, rt_teardown),
        cmocka_unit_test_setup_teardown(symlinks_that_lead_out_and_set_id_files_are_refused,
                                        rt_setup, rt_teardown),
        cmocka_unit_test_setup_teardown(a_format_1_manifest_is_still_read, rt_setup, rt_teardown),
        cmocka_unit_test_setup_teardown(a_stage_expecting_a_digest_refuses_another_build, rt_setup,
                                        rt_teardown),
        cmocka_unit_test_setup_teardown(stage_refuses_unsafe_sources_and_changes_nothing, rt_setup,
                                        rt_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
