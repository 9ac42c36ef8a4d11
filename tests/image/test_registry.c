/* Pulling images from a real registry (docker-registry, fed by skopeo):
 * anonymous over plain http, and over TLS with an htpasswd user; by tag
 * and by digest; and every refusal: an unknown tag, a wrong digest,
 * refused credentials, an auth file others can read, a registry that does
 * not answer, and a blob changed in the registry's storage.
 * With token auth, its token service the test's own (token_issuer.h): a
 * pull and an artifact's push with the user's token, and a pull without
 * credentials refused. And artifacts (what Checkpoints=docker:// stores): pushed in one request
 * and in chunks, over http and over TLS with a user; listed, read back by
 * digest, deleted, and a deletion the registry does not allow refused. */
#include <errno.h>
#include <fcntl.h>
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

#include "common/sha256.h"
#include "image/artifact.h"
#include "image/image.h"
#include "tests/image/layouts.h"
#include "tests/image/registry_harness.h"
#include "tests/image/token_issuer.h"
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
    img_progress progress = {0};
    img_registry_options options = {.insecure = insecure, .n_insecure = 1, .progress = &progress};
    char reference[600], resolved[512];
    snprintf(reference, sizeof(reference), "docker://%s/demo/app:v2", registry.address);
    if (pull_and_flatten(fx, reference, &options, resolved, sizeof(resolved), &err) < 0)
        fail_msg("pull: %s", err.message);
    /* The pull counted every layer's bytes, and the total the manifest gives. */
    assert_true(atomic_load(&progress.layers) >= 1);
    assert_int_equal(atomic_load(&progress.layer), atomic_load(&progress.layers));
    assert_true(atomic_load(&progress.total) > 0);
    assert_int_equal(atomic_load(&progress.bytes), atomic_load(&progress.total));
    options.progress = NULL;
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

/* A file of size pseudo-random bytes at <tmp>/name, opened for reading;
 * its digest into digest. */
static int artifact_file(rt_fixture *fx, const char *name, size_t size, char *digest)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", fx->tmp, name);
    unsigned char *bytes = malloc(size);
    assert_non_null(bytes);
    for (size_t i = 0; i < size; i++)
        bytes[i] = (unsigned char)((i * 2654435761u) >> 13);
    rt_write_file(path, bytes, size, 0600);
    free(bytes);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    char hex[ACT_SHA256_HEX_SIZE];
    act_error err = {0};
    assert_int_equal(act_sha256_fd(fd, path, hex, NULL, &err), 0);
    snprintf(digest, IMG_DIGEST_SIZE, "sha256:%s", hex);
    return fd;
}

static void push(const char *repository, const char *tag, int fd, size_t size, const char *digest,
                 const img_registry_options *options, uint64_t chunk)
{
    const img_annotation notes[] = {{"org.activator.test", tag}};
    img_artifact artifact = {.repository = repository,
                             .tag = tag,
                             .artifact_type = "application/vnd.activator.test.v1+json",
                             .layer_media_type = "application/vnd.activator.test.layer.v1",
                             .fd = fd,
                             .size = size,
                             .digest = digest,
                             .annotations = notes,
                             .n_annotations = 1};
    char manifest_digest[IMG_DIGEST_SIZE];
    act_error err = {0};
    if (img_artifact_push(&artifact, options, chunk, manifest_digest, &err) < 0)
        fail_msg("push of %s: %s", tag, err.message);
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

    /* An artifact pushed with the user, in chunks (Basic on every request
     * of the upload). */
    char artifact_digest[IMG_DIGEST_SIZE], repository[300];
    int fd = artifact_file(fx, "artifact", (1u << 20) + 3, artifact_digest);
    snprintf(repository, sizeof(repository), "docker://%s/ckpt/web1", registry.address);
    push(repository, "c1", fd, (1u << 20) + 3, artifact_digest, &options, 512u << 10);
    close(fd);
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

static void a_registry_with_a_token_service(void **state)
{
    rt_fixture *fx = *state;
    act_error err = {0};
    if (reg_harness_start_token(&registry, &err) < 0)
        fail_msg("registry: %s", err.message);
    char *layout = image_make_layout(fx);
    if (reg_harness_push(&registry, layout, "v1", "demo/app", &err) < 0)
        fail_msg("push: %s", err.message);
    const char *insecure[] = {registry.address};
    img_registry_options options = {
        .auth_file = registry.auth_file, .insecure = insecure, .n_insecure = 1};
    char reference[600], resolved[512];
    snprintf(reference, sizeof(reference), "docker://%s/demo/app:v1", registry.address);
    unsigned given = token_issuer_given(registry.token);
    if (pull_and_flatten(fx, reference, &options, resolved, sizeof(resolved), &err) < 0)
        fail_msg("pull with a token: %s", err.message);
    assert_true(token_issuer_given(registry.token) > given);

    /* An artifact: its upload asks for a push token. */
    char digest[IMG_DIGEST_SIZE], repository[300];
    int fd = artifact_file(fx, "artifact", 5000, digest);
    snprintf(repository, sizeof(repository), "docker://%s/ckpt/web1", registry.address);
    push(repository, "c1", fd, 5000, digest, &options, 1024);
    close(fd);

    /* Without credentials the token service refuses, and the pull says
     * where they go. */
    img_registry_options anonymous = {.insecure = insecure, .n_insecure = 1};
    unsigned refused = token_issuer_refused(registry.token);
    assert_int_equal(pull_and_flatten(fx, reference, &anonymous, resolved, sizeof(resolved), &err),
                     -EACCES);
    assert_non_null(strstr(err.message, "gave no token"));
    assert_non_null(strstr(err.message, "auth file"));
    assert_true(token_issuer_refused(registry.token) > refused);
    free(layout);
}

static void artifacts_are_pushed_listed_read_and_deleted(void **state)
{
    rt_fixture *fx = *state;
    act_error err = {0};
    if (reg_harness_start(&registry, false, false, &err) < 0)
        fail_msg("registry: %s", err.message);
    const char *insecure[] = {registry.address};
    img_registry_options options = {.insecure = insecure, .n_insecure = 1};
    char repository[300];
    snprintf(repository, sizeof(repository), "docker://%s/ckpt/web1", registry.address);
    /* 3 MiB + 17 bytes in chunks of 1 MiB: four PATCHes; 100 bytes in one. */
    size_t big_size = (3u << 20) + 17;
    char big_digest[IMG_DIGEST_SIZE], small_digest[IMG_DIGEST_SIZE];
    int big = artifact_file(fx, "big", big_size, big_digest);
    int small = artifact_file(fx, "small", 100, small_digest);
    push(repository, "c1", big, big_size, big_digest, &options, 1u << 20);
    push(repository, "c2", small, 100, small_digest, &options, 0);

    char **tags = NULL;
    assert_int_equal(img_artifact_tags(repository, &options, &tags, &err), 0);
    assert_non_null(tags[0]);
    assert_non_null(tags[1]);
    assert_null(tags[2]);
    for (size_t i = 0; tags[i]; i++)
        free(tags[i]);
    free(tags);
    json_object *manifest = NULL, *layers, *annotations, *note;
    char manifest_digest[IMG_DIGEST_SIZE];
    assert_int_equal(
        img_artifact_manifest(repository, "c1", &options, &manifest, manifest_digest, &err), 0);
    assert_true(json_object_object_get_ex(manifest, "layers", &layers));
    assert_string_equal(json_object_get_string(
                            json_object_object_get(json_object_array_get_idx(layers, 0), "digest")),
                        big_digest);
    assert_true(json_object_object_get_ex(manifest, "annotations", &annotations));
    assert_true(json_object_object_get_ex(annotations, "org.activator.test", &note));
    assert_string_equal(json_object_get_string(note), "c1");
    json_object_put(manifest);

    /* Read back by digest, verified; a digest the repository lacks. */
    char back[PATH_MAX];
    snprintf(back, sizeof(back), "%s/back", fx->tmp);
    int out = open(back, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(out >= 0);
    if (img_blob_download(repository, big_digest, big_size, &options, out, &err) < 0)
        fail_msg("download: %s", err.message);
    close(out);
    struct stat st;
    assert_int_equal(stat(back, &st), 0);
    assert_int_equal((size_t)st.st_size, big_size);
    out = open(back, O_WRONLY | O_TRUNC | O_CLOEXEC);
    assert_int_equal(
        img_blob_download(repository,
                          "sha256:00000000000000000000000000000000000000000000000000000000000000"
                          "00",
                          big_size, &options, out, &err),
        -ENOENT);
    close(out);

    assert_int_equal(img_artifact_delete(repository, manifest_digest, &options, &err), 0);
    assert_int_equal(
        img_artifact_manifest(repository, "c1", &options, &manifest, manifest_digest, &err),
        -ENOENT);
    reg_harness_stop(&registry);

    /* A registry that does not allow deletion says so. */
    if (reg_harness_start_with(&registry, false, false, false, &err) < 0)
        fail_msg("registry: %s", err.message);
    insecure[0] = registry.address;
    snprintf(repository, sizeof(repository), "docker://%s/ckpt/web1", registry.address);
    push(repository, "c2", small, 100, small_digest, &options, 0);
    assert_int_equal(
        img_artifact_manifest(repository, "c2", &options, &manifest, manifest_digest, &err), 0);
    json_object_put(manifest);
    assert_int_equal(img_artifact_delete(repository, manifest_digest, &options, &err), -EOPNOTSUPP);
    assert_non_null(strstr(err.message, "does not allow deletion"));
    close(big);
    close(small);
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
        cmocka_unit_test_setup_teardown(a_registry_with_a_token_service, rt_setup, teardown),
        cmocka_unit_test_setup_teardown(artifacts_are_pushed_listed_read_and_deleted, rt_setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
