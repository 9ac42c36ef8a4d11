/* Pulling images from a real registry (docker-registry, fed by skopeo):
 * anonymous over plain http, and over TLS with an htpasswd user; by tag
 * and by digest; and every refusal: an unknown tag, a wrong digest,
 * refused credentials, an auth file others can read, a registry that does
 * not answer, and a blob changed in the registry's storage. */
#include <errno.h>
#include <limits.h>
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

#include "image/image.h"
#include "tests/image/layouts.h"
#include "tests/image/registry_harness.h"
#include "tests/release/helpers.h"

static reg_harness registry;

static int teardown(void **state)
{
    reg_harness_stop(&registry);
    return rt_teardown(state);
}

/* Pulls reference into <tmp>/pulled-N and flattens it into <tmp>/flat-N;
 * the pull's result, with resolved filled. */
static int pull_and_flatten(rt_fixture *fx, const char *reference,
                            const img_registry_options *options, char *resolved, size_t size,
                            act_error *err)
{
    static int n;
    char layout[PATH_MAX], flat[PATH_MAX], local[PATH_MAX + 16];
    snprintf(layout, sizeof(layout), "%s/pulled-%d", fx->tmp, n);
    snprintf(flat, sizeof(flat), "%s/flat-%d", fx->tmp, n++);
    int r = img_pull(reference, options, layout, resolved, size, err);
    if (r < 0)
        return r;
    snprintf(local, sizeof(local), "oci:%s:" IMG_PULLED_TAG, layout);
    img_image image;
    if ((r = img_open(local, &image, err)) < 0)
        return r;
    assert_int_equal(mkdir(flat, 0700), 0);
    r = img_flatten(&image, flat, err);
    img_image_clear(&image);
    if (r == 0) {
        char app[PATH_MAX + 16];
        snprintf(app, sizeof(app), "%s/bin/app", flat);
        assert_true(rt_exists(app));
    }
    return r;
}

static void an_anonymous_registry_over_http(void **state)
{
    rt_fixture *fx = *state;
    act_error err = {0};
    if (reg_harness_start(&registry, false, false, &err) < 0)
        fail_msg("registry: %s", err.message);
    char *layout = image_make_layout(fx);
    if (reg_harness_push(&registry, layout, "v2", "demo/app", &err) < 0)
        fail_msg("push: %s", err.message);
    const char *insecure[] = {registry.address};
    img_registry_options options = {.insecure = insecure, .n_insecure = 1};
    char reference[600], resolved[512];
    snprintf(reference, sizeof(reference), "docker://%s/demo/app:v2", registry.address);
    if (pull_and_flatten(fx, reference, &options, resolved, sizeof(resolved), &err) < 0)
        fail_msg("pull: %s", err.message);
    char expected[300];
    snprintf(expected, sizeof(expected), "docker://%s/demo/app@sha256:", registry.address);
    assert_int_equal(strncmp(resolved, expected, strlen(expected)), 0);
    /* By the digest it resolved to: the same image. */
    char again[512];
    snprintf(reference, sizeof(reference), "%s", resolved);
    if (pull_and_flatten(fx, reference, &options, again, sizeof(again), &err) < 0)
        fail_msg("pull by digest: %s", err.message);
    assert_string_equal(again, resolved);

    /* A Docker v2 schema 2 manifest, and zstd layers, as skopeo makes them. */
    static const struct {
        const char *repository, *args;
    } kinds[] = {{"demo/docker", "--format v2s2"}, {"demo/zstd", "--dest-compress-format zstd"}};
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        if (reg_harness_push_with(&registry, layout, "v2", kinds[i].repository, kinds[i].args,
                                  &err) < 0)
            fail_msg("push %s: %s", kinds[i].args, err.message);
        snprintf(reference, sizeof(reference), "docker://%s/%s:v2", registry.address,
                 kinds[i].repository);
        if (pull_and_flatten(fx, reference, &options, again, sizeof(again), &err) < 0)
            fail_msg("pull of %s: %s", kinds[i].args, err.message);
    }

    /* Refusals. */
    snprintf(reference, sizeof(reference), "docker://%s/demo/app:v9", registry.address);
    assert_int_equal(pull_and_flatten(fx, reference, &options, again, sizeof(again), &err),
                     -ENOENT);
    assert_non_null(strstr(err.message, "no tag v9"));
    snprintf(reference, sizeof(reference),
             "docker://%s/demo/app@sha256:0000000000000000000000000000000000000000000000000000"
             "000000000000",
             registry.address);
    assert_int_equal(pull_and_flatten(fx, reference, &options, again, sizeof(again), &err),
                     -ENOENT);
    assert_int_equal(pull_and_flatten(fx, "docker://app:v1", &options, again, sizeof(again), &err),
                     -EINVAL);
    assert_non_null(strstr(err.message, "name the registry and the repository"));
    assert_int_equal(
        pull_and_flatten(fx, "docker://library/app:v1", &options, again, sizeof(again), &err),
        -EINVAL);
    assert_non_null(strstr(err.message, "not a registry host"));
    snprintf(reference, sizeof(reference), "docker://%s/Demo/App:v2", registry.address);
    assert_int_equal(pull_and_flatten(fx, reference, &options, again, sizeof(again), &err),
                     -EINVAL);
    assert_non_null(strstr(err.message, "not a repository name"));
    assert_int_equal(pull_and_flatten(fx, "docker://127.0.0.1:1/demo/app:v1", &options, again,
                                      sizeof(again), &err),
                     -EHOSTUNREACH);
    assert_non_null(strstr(err.message, "is the registry up"));
    /* Without RegistryInsecure=, https to a plain http registry fails. */
    snprintf(reference, sizeof(reference), "docker://%s/demo/app:v2", registry.address);
    assert_int_equal(pull_and_flatten(fx, reference, NULL, again, sizeof(again), &err),
                     -EHOSTUNREACH);

    /* A layer changed in the registry's storage is refused by its digest. */
    char command[PATH_MAX * 2];
    snprintf(command, sizeof(command),
             "f=$(find %s/docker/registry/v2/blobs -name data -size +1k | head -1) && "
             "printf 'X' | dd of=\"$f\" bs=1 seek=5 conv=notrunc 2>/dev/null",
             registry.storage);
    assert_int_equal(system(command), 0);
    assert_int_equal(pull_and_flatten(fx, reference, &options, again, sizeof(again), &err),
                     -EBADMSG);
    assert_non_null(strstr(err.message, "changed or damaged"));
    free(layout);
}

static void a_registry_over_tls_with_a_user(void **state)
{
    rt_fixture *fx = *state;
    act_error err = {0};
    if (reg_harness_start(&registry, true, true, &err) < 0)
        fail_msg("registry: %s", err.message);
    char *layout = image_make_layout(fx);
    if (reg_harness_push(&registry, layout, "v1", "demo/app", &err) < 0)
        fail_msg("push: %s", err.message);
    img_registry_options options = {.auth_file = registry.auth_file,
                                    .certs_dir = registry.certs_dir};
    char reference[600], resolved[512];
    snprintf(reference, sizeof(reference), "docker://%s/demo/app:v1", registry.address);
    if (pull_and_flatten(fx, reference, &options, resolved, sizeof(resolved), &err) < 0)
        fail_msg("pull: %s", err.message);

    /* No credentials: the registry's challenge is answered with a refusal
     * that says where they go. */
    img_registry_options anonymous = {.certs_dir = registry.certs_dir};
    assert_int_equal(pull_and_flatten(fx, reference, &anonymous, resolved, sizeof(resolved), &err),
                     -EACCES);
    assert_non_null(strstr(err.message, "auth file"));
    /* An auth file others can read is refused. */
    assert_int_equal(chmod(registry.auth_file, 0644), 0);
    assert_int_equal(pull_and_flatten(fx, reference, &options, resolved, sizeof(resolved), &err),
                     -EPERM);
    assert_non_null(strstr(err.message, "0600"));
    /* Wrong credentials. */
    char text[256];
    snprintf(text, sizeof(text), "{\"auths\":{\"%s\":{\"auth\":\"cHVsbGVyOndyb25n\"}}}",
             registry.address); /* puller:wrong */
    rt_write_file(registry.auth_file, text, strlen(text), 0600);
    assert_int_equal(chmod(registry.auth_file, 0600), 0);
    assert_int_equal(pull_and_flatten(fx, reference, &options, resolved, sizeof(resolved), &err),
                     -EACCES);
    /* Without our CA, the registry's certificate is not trusted. */
    img_registry_options no_ca = {.auth_file = registry.auth_file, .certs_dir = "/nonexistent"};
    assert_true(pull_and_flatten(fx, reference, &no_ca, resolved, sizeof(resolved), &err) < 0);
    free(layout);
}

int main(int argc, char **argv)
{
    rt_parse_args(argc, argv);
    if (!reg_harness_available() || system("command -v umoci >/dev/null") != 0) {
        fprintf(stderr, "test-registry: docker-registry, skopeo or umoci is missing "
                        "(scripts/install-deps.sh); skipped\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(an_anonymous_registry_over_http, rt_setup, teardown),
        cmocka_unit_test_setup_teardown(a_registry_over_tls_with_a_user, rt_setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
