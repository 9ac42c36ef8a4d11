/* Every bad host, version, path and pin is refused by every operation with
 * an error naming it, before any file is touched. */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "common/cleanup.h"
#include "release/release.h"
#include "tests/release/helpers.h"

/* A NUL cannot sit inside a C string: through this API a name with a NUL in
 * it is just the part before the NUL, so the empty string is the case of a
 * NUL first byte. */
static const char *const bad_names[] = {
    "",
    ".",
    "..",
    "../etc",
    "a/b",
    "/abs",
    ".hidden",
    "a b",
    "tab\tx",
    "nl\nx",
    "caf\xc3\xa9",
    "x;rm",
    "a\\b",
    "*",
    "~root",
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", /* 65 */
};

/* Names the error must show (the visible ones; control bytes are escaped,
 * and a long one is cut short, so its start is what must be there). */
static void assert_names(const act_error *err, const char *what, const char *bad)
{
    assert_non_null(strstr(err->message, what));
    char start[41];
    snprintf(start, sizeof(start), "%s", bad);
    if (start[0] && strspn(start, "abcdefghijklmnopqrstuvwxyz./;\\*~") == strlen(start))
        assert_non_null(strstr(err->message, start));
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

static void bad_host_names_are_refused_everywhere(void **state)
{
    rt_fixture *fx = *state;
    for (size_t i = 0; i < ARRAY_SIZE(bad_names); i++) {
        const char *bad = bad_names[i];
        act_error err = {0};
        rel_identity id;
        rel_resolved resolved;
        rel_entry *entries = NULL;
        size_t n = 0, removed = 0;
        char live[REL_NAME_SIZE];
        rel_pin pin = {.version = "v1"};
        memset(pin.digest, 'a', 64);

        assert_int_equal(rel_stage(fx->store, bad, "v1", rt_app_v1, NULL, &id, &err), -EINVAL);
        assert_names(&err, "host name", bad);
        assert_int_equal(rel_promote(fx->store, bad, "v1", &err), -EINVAL);
        assert_names(&err, "host name", bad);
        assert_int_equal(rel_resolve(fx->store, bad, NULL, NULL, &resolved, &err), -EINVAL);
        assert_int_equal(resolved.exec_fd, -1);
        assert_int_equal(rel_resolve(fx->store, bad, &pin, NULL, &resolved, &err), -EINVAL);
        assert_int_equal(rel_live_version(fx->store, bad, live, &err), -EINVAL);
        assert_int_equal(rel_list(fx->store, bad, &entries, &n, &err), -EINVAL);
        assert_int_equal(rel_verify(fx->store, bad, "v1", &err), -EINVAL);
        assert_int_equal(rel_gc(fx->store, bad, NULL, 0, 0, &removed, &err), -EINVAL);
        assert_names(&err, "host name", bad);
    }
    /* Nothing was created: the releases directory is still empty. */
    assert_int_equal(count_entries(fx->releases), 0);
}

static void bad_version_names_are_refused_everywhere(void **state)
{
    rt_fixture *fx = *state;
    act_error err = {0};
    if (rel_stage(fx->store, "web1", "v1", rt_app_v1, NULL, NULL, &err) < 0)
        fail_msg("stage: %s", err.message);
    if (rel_promote(fx->store, "web1", "v1", &err) < 0)
        fail_msg("promote: %s", err.message);
    char *host_dir = rt_join(fx->releases, "web1");
    int before = count_entries(host_dir);

    for (size_t i = 0; i < ARRAY_SIZE(bad_names) + 1; i++) {
        /* "live" is a valid name but reserved for the live link. */
        const char *bad = i < ARRAY_SIZE(bad_names) ? bad_names[i] : "live";
        rel_resolved resolved;
        size_t removed = 0;
        rel_pin pin = {0};
        snprintf(pin.version, sizeof(pin.version), "%s", bad);
        memset(pin.digest, 'a', 64);

        assert_int_equal(rel_stage(fx->store, "web1", bad, rt_app_v1, NULL, NULL, &err), -EINVAL);
        assert_names(&err, "version", bad);
        assert_int_equal(rel_promote(fx->store, "web1", bad, &err), -EINVAL);
        assert_names(&err, "version", bad);
        assert_int_equal(rel_verify(fx->store, "web1", bad, &err), -EINVAL);
        assert_names(&err, "version", bad);
        if (strlen(bad) < REL_NAME_SIZE) {
            assert_int_equal(rel_resolve(fx->store, "web1", &pin, NULL, &resolved, &err), -EINVAL);
            assert_names(&err, "version", bad);
        }
        const char *keep[] = {bad};
        assert_int_equal(rel_gc(fx->store, "web1", keep, 1, 0, &removed, &err), -EINVAL);
        assert_names(&err, "version", bad);
    }
    /* Nothing changed: same entries, v1 still live and intact. */
    assert_int_equal(count_entries(host_dir), before);
    char live[REL_NAME_SIZE];
    assert_int_equal(rel_live_version(fx->store, "web1", live, &err), 0);
    assert_string_equal(live, "v1");
    assert_int_equal(rel_verify(fx->store, "web1", "v1", &err), 0);
    free(host_dir);
}

static void bad_paths_inside_builds_are_refused(void **state)
{
    rt_fixture *fx = *state;
    char *src = rt_join(fx->tmp, "src");
    assert_int_equal(mkdir(src, 0755), 0);
    char *app = rt_join(src, "app");
    rt_copy_file(rt_app_v1, app, 0755);
    const char *bad_paths[] = {"", "/app", "../app", "a/../app", "./app", "a//b", "app/", "a\nb"};
    act_error err = {0};
    for (size_t i = 0; i < ARRAY_SIZE(bad_paths); i++) {
        assert_int_equal(rel_stage(fx->store, "web1", "v1", src, bad_paths[i], NULL, &err),
                         -EINVAL);
        assert_non_null(strstr(err.message, "exec_path"));
    }
    assert_int_equal(count_entries(fx->releases), 0);

    if (rel_stage(fx->store, "web1", "v1", src, "app", NULL, &err) < 0)
        fail_msg("stage: %s", err.message);
    if (rel_promote(fx->store, "web1", "v1", &err) < 0)
        fail_msg("promote: %s", err.message);
    rel_resolved resolved;
    for (size_t i = 0; i < ARRAY_SIZE(bad_paths); i++) {
        assert_int_equal(rel_resolve(fx->store, "web1", NULL, bad_paths[i], &resolved, &err),
                         -EINVAL);
        assert_non_null(strstr(err.message, "override"));
    }
    free(app);
    free(src);
}

int main(int argc, char **argv)
{
    rt_parse_args(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(bad_host_names_are_refused_everywhere, rt_setup,
                                        rt_teardown),
        cmocka_unit_test_setup_teardown(bad_version_names_are_refused_everywhere, rt_setup,
                                        rt_teardown),
        cmocka_unit_test_setup_teardown(bad_paths_inside_builds_are_refused, rt_setup, rt_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
