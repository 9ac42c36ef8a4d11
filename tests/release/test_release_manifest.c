/* Manifests are outside input: a malformed, edited or oversized one is a
 * clear error naming the file and the field. Also the hashing path against
 * known SHA-256 values. */
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

#include "common/cleanup.h"
#include "release/internal.h"
#include "release/release.h"
#include "tests/release/helpers.h"

static const char *const good_digest =
    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

/* Writes text as web1/v1's manifest and expects verify and resolve to refuse
 * it with -expected, naming the manifest file and field. */
static void expect_refused(rt_fixture *fx, const char *text, int expected, const char *field)
{
    char *manifest = rt_join(fx->releases, "web1/v1/manifest.json");
    chmod(manifest, 0644);
    rt_write_file(manifest, text, strlen(text), 0444);
    act_error err = {0};
    int r = rel_verify(fx->store, "web1", "v1", &err);
    if (r != -expected)
        fail_msg("verify returned %d (%s) for manifest %s", r, err.message, text);
    assert_non_null(strstr(err.message, manifest));
    if (!strstr(err.message, field))
        fail_msg("error \"%s\" does not name %s", err.message, field);
    rel_resolved resolved;
    r = rel_resolve(fx->store, "web1", NULL, NULL, &resolved, &err);
    assert_int_equal(r, -expected);
    assert_int_equal(resolved.exec_fd, -1);
    assert_non_null(strstr(err.message, field));
    free(manifest);
}

static void malformed_manifests_name_file_and_field(void **state)
{
    rt_fixture *fx = *state;
    act_error err = {0};
    rel_identity id;
    if (rel_stage(fx->store, "web1", "v1", rt_app_v1, NULL, &id, &err) < 0)
        fail_msg("stage: %s", err.message);
    if (rel_promote(fx->store, "web1", "v1", &err) < 0)
        fail_msg("promote: %s", err.message);

    char entry[512];
    snprintf(entry, sizeof(entry),
             "{\"path\": \"rel-test-app-v1\", \"size\": %llu, \"sha256\": \"%s\"}",
             (unsigned long long)id.exec_size, id.digest);
    char head[512];
    snprintf(head, sizeof(head),
             "\"format\": 1, \"host\": \"web1\", \"version\": \"v1\", "
             "\"exec_path\": \"rel-test-app-v1\", \"staged_at\": 1");
    char text[4096];
    const char *bd = id.build_digest;
    snprintf(text, sizeof(text), "{%s, \"build_digest\": \"%s\", \"files\": [%s]", head, bd, entry);
    expect_refused(fx, text, EUCLEAN, "not valid JSON");
    snprintf(text, sizeof(text), "{%s, \"build_digest\": \"%s\", \"files\": [%s]} x", head, bd,
             entry);
    expect_refused(fx, text, EUCLEAN, "not valid JSON");
    snprintf(text, sizeof(text), "{%s, \"build_digest\": \"%s\"}", head, bd);
    expect_refused(fx, text, EUCLEAN, "field files is missing");
    snprintf(text, sizeof(text), "{%s, \"build_digest\": \"%s\", \"files\": {\"a\": %s}}", head, bd,
             entry);
    expect_refused(fx, text, EUCLEAN, "field files must be an array");
    snprintf(text, sizeof(text), "{%s, \"build_digest\": \"%.10s\", \"files\": [%s]}", head, bd,
             entry);
    expect_refused(fx, text, EUCLEAN, "field build_digest is not 64");
    /* Edited: a well-formed digest of something else. */
    snprintf(text, sizeof(text), "{%s, \"build_digest\": \"%s\", \"files\": [%s]}", head,
             good_digest, entry);
    expect_refused(fx, text, EUCLEAN, "field build_digest is");
    snprintf(text, sizeof(text), "{%s, \"build_digest\": \"%s\", \"files\": [%s, %s]}", head, bd,
             entry, entry);
    expect_refused(fx, text, EUCLEAN, "field files[1].path is out of order");

    /* Field-level mistakes in an otherwise well-formed manifest. */
    snprintf(text, sizeof(text),
             "{\"format\": 1, \"host\": \"web2\", \"version\": \"v1\", \"exec_path\": "
             "\"rel-test-app-v1\", \"staged_at\": 1, \"build_digest\": \"%s\", \"files\": [%s]}",
             id.build_digest, entry);
    expect_refused(fx, text, EUCLEAN, "field host");
    snprintf(text, sizeof(text),
             "{\"format\": 1, \"host\": \"web1\", \"version\": \"v1\", \"exec_path\": "
             "\"other\", \"staged_at\": 1, \"build_digest\": \"%s\", \"files\": [%s]}",
             id.build_digest, entry);
    expect_refused(fx, text, EUCLEAN, "field exec_path");
    snprintf(text, sizeof(text),
             "{\"format\": 1, \"host\": \"web1\", \"version\": \"v1\", \"exec_path\": "
             "\"rel-test-app-v1\", \"staged_at\": \"yesterday\", \"build_digest\": \"%s\", "
             "\"files\": [%s]}",
             id.build_digest, entry);
    expect_refused(fx, text, EUCLEAN, "field staged_at must be an integer");
    snprintf(text, sizeof(text),
             "{%s, \"build_digest\": \"%s\", \"files\": [{\"path\": \"../../etc/passwd\", "
             "\"size\": 1, \"sha256\": \"%s\"}]}",
             head, id.build_digest, good_digest);
    expect_refused(fx, text, EUCLEAN, "field files[0].path");
    snprintf(text, sizeof(text),
             "{%s, \"build_digest\": \"%s\", \"files\": [{\"path\": \"rel-test-app-v1\", "
             "\"size\": -5, \"sha256\": \"%s\"}]}",
             head, id.build_digest, id.digest);
    expect_refused(fx, text, EUCLEAN, "field files[0].size is negative");
    snprintf(text, sizeof(text),
             "{%s, \"build_digest\": \"%s\", \"files\": [{\"path\": \"rel-test-app-v1\", "
             "\"size\": 1, \"sha256\": \"%.63s\"}]}",
             head, id.build_digest, id.digest);
    expect_refused(fx, text, EUCLEAN, "field files[0].sha256");
    /* Format 2: each entry's type, mode and target are checked, and a
     * symlink leading out of the build is refused even under a digest that
     * matches (the digest is not a key: anyone can compute it). */
    char head2[512], file2[512];
    snprintf(head2, sizeof(head2),
             "\"format\": 2, \"host\": \"web1\", \"version\": \"v1\", "
             "\"exec_path\": \"rel-test-app-v1\", \"staged_at\": 1, \"source\": \"\"");
    snprintf(file2, sizeof(file2),
             "{\"path\": \"rel-test-app-v1\", \"type\": \"file\", \"mode\": 365, "
             "\"size\": %llu, \"sha256\": \"%s\"}",
             (unsigned long long)id.exec_size, id.digest);
    snprintf(text, sizeof(text),
             "{%s, \"build_digest\": \"%s\", \"entries\": [{\"path\": \"a\", \"type\": "
             "\"fifo\", \"mode\": 420}, %s]}",
             head2, good_digest, file2);
    expect_refused(fx, text, EUCLEAN, "field entries[0].type");
    snprintf(text, sizeof(text),
             "{%s, \"build_digest\": \"%s\", \"entries\": [{\"path\": \"a\", \"type\": "
             "\"dir\", \"mode\": 511}, %s]}",
             head2, good_digest, file2);
    expect_refused(fx, text, EUCLEAN, "field entries[0].mode");
    snprintf(text, sizeof(text),
             "{%s, \"build_digest\": \"%s\", \"entries\": [{\"path\": \"a\", \"type\": "
             "\"symlink\", \"mode\": 511, \"target\": \"/etc/passwd\"}, %s]}",
             head2, good_digest, file2);
    expect_refused(fx, text, EUCLEAN, "field entries[0].target");
    rel_file escaping[2] = {
        {.path = "a", .type = REL_ENTRY_SYMLINK, .mode = 0777, .target = "../x"},
        {.path = "rel-test-app-v1", .type = REL_ENTRY_FILE, .mode = 0555, .size = id.exec_size},
    };
    snprintf(escaping[1].digest, sizeof(escaping[1].digest), "%s", id.digest);
    char escaping_digest[65];
    assert_int_equal(rel_build_digest(2, escaping, 2, escaping_digest), 0);
    snprintf(text, sizeof(text),
             "{%s, \"build_digest\": \"%s\", \"entries\": [{\"path\": \"a\", \"type\": "
             "\"symlink\", \"mode\": 511, \"target\": \"../x\"}, %s]}",
             head2, escaping_digest, file2);
    expect_refused(fx, text, EXDEV, "a -> ../x leads out of the build");
    snprintf(text, sizeof(text), "{\"format\": 3}");
    expect_refused(fx, text, EUCLEAN, "field format is 3");
    expect_refused(fx, "[1, 2]", EUCLEAN, "top level must be an object");

    /* Oversized: refused by size before it is parsed. */
    size_t big = REL_MANIFEST_MAX + 1;
    char *huge = malloc(big + 1);
    assert_non_null(huge);
    memset(huge, ' ', big);
    huge[0] = '{';
    huge[big - 1] = '}';
    huge[big] = '\0';
    expect_refused(fx, huge, EFBIG, "byte limit");
    free(huge);

    /* A manifest that is a symlink is refused like any other link. */
    char *manifest = rt_join(fx->releases, "web1/v1/manifest.json");
    assert_int_equal(unlink(manifest), 0);
    assert_int_equal(symlink("/etc/hostname", manifest), 0);
    assert_int_equal(rel_verify(fx->store, "web1", "v1", &err), -ELOOP);
    assert_non_null(strstr(err.message, manifest));
    assert_int_equal(unlink(manifest), 0);
    assert_int_equal(rel_verify(fx->store, "web1", "v1", &err), -EUCLEAN);
    assert_non_null(strstr(err.message, "missing"));
    free(manifest);
}

static void verify_catches_added_and_missing_files(void **state)
{
    rt_fixture *fx = *state;
    char *src = rt_join(fx->tmp, "src");
    assert_int_equal(mkdir(src, 0755), 0);
    char *app = rt_join(src, "app");
    char *data = rt_join(src, "data");
    rt_copy_file(rt_app_v1, app, 0755);
    rt_write_file(data, "d", 1, 0644);
    act_error err = {0};
    if (rel_stage(fx->store, "web1", "v1", src, "app", NULL, &err) < 0)
        fail_msg("stage: %s", err.message);

    char *added = rt_join(fx->releases, "web1/v1/extra");
    rt_write_file(added, "x", 1, 0444);
    assert_int_equal(rel_verify(fx->store, "web1", "v1", &err), -EBADMSG);
    assert_non_null(strstr(err.message, "extra"));
    assert_non_null(strstr(err.message, "not in its manifest"));
    assert_int_equal(unlink(added), 0);

    char *staged_data = rt_join(fx->releases, "web1/v1/data");
    assert_int_equal(unlink(staged_data), 0);
    assert_int_equal(rel_verify(fx->store, "web1", "v1", &err), -EBADMSG);
    assert_non_null(strstr(err.message, "data"));
    assert_non_null(strstr(err.message, "missing"));
    /* resolve hashes only the executable, so it still runs; promote does a
     * full verify and refuses. */
    assert_int_equal(rel_promote(fx->store, "web1", "v1", &err), -EBADMSG);
    free(staged_data);
    free(added);
    free(data);
    free(app);
    free(src);
}

static void digest_fd_matches_known_values(void **state)
{
    rt_fixture *fx = *state;
    struct {
        const char *data;
        const char *sha256;
    } vectors[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
    };
    char *path = rt_join(fx->tmp, "vector");
    for (size_t i = 0; i < ARRAY_SIZE(vectors); i++) {
        rt_write_file(path, vectors[i].data, strlen(vectors[i].data), 0644);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        char out[REL_DIGEST_SIZE];
        uint64_t size = 99;
        act_error err = {0};
        assert_int_equal(rel_digest_fd(fd, out, &size, &err), 0);
        assert_string_equal(out, vectors[i].sha256);
        assert_int_equal(size, strlen(vectors[i].data));
        close(fd);
    }

    /* Several blocks and a ragged tail, with the fd's position moved: the
     * hash still covers the whole file and leaves the position alone. */
    size_t len = 3 * 1024 * 1024 + 12345;
    unsigned char *big = malloc(len);
    assert_non_null(big);
    for (size_t i = 0; i < len; i++)
        big[i] = (unsigned char)(i * 2654435761u >> 13);
    rt_write_file(path, big, len, 0644);
    free(big);
    char expected[65], out[REL_DIGEST_SIZE];
    rt_sha256_file(path, expected);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(lseek(fd, 1000, SEEK_SET), 1000);
    uint64_t size = 0;
    act_error err = {0};
    assert_int_equal(rel_digest_fd(fd, out, &size, &err), 0);
    assert_string_equal(out, expected);
    assert_int_equal(size, len);
    assert_int_equal(lseek(fd, 0, SEEK_CUR), 1000);
    close(fd);
    free(path);
}

static void store_open_creates_and_refuses_a_file(void **state)
{
    rt_fixture *fx = *state;
    char *nested = rt_join(fx->tmp, "a/b/releases");
    rel_store *store = NULL;
    act_error err = {0};
    if (rel_store_open(nested, &store, &err) < 0)
        fail_msg("open: %s", err.message);
    struct stat st;
    assert_int_equal(stat(nested, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    rel_store_free(store);
    rel_store_free(NULL);

    char *file = rt_join(fx->tmp, "plain");
    rt_write_file(file, "x", 1, 0644);
    store = NULL;
    assert_true(rel_store_open(file, &store, &err) < 0);
    assert_null(store);
    assert_non_null(strstr(err.message, file));
    free(file);
    free(nested);
}

int main(int argc, char **argv)
{
    rt_parse_args(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(malformed_manifests_name_file_and_field, rt_setup,
                                        rt_teardown),
        cmocka_unit_test_setup_teardown(verify_catches_added_and_missing_files, rt_setup,
                                        rt_teardown),
        cmocka_unit_test_setup_teardown(digest_fd_matches_known_values, rt_setup, rt_teardown),
        cmocka_unit_test_setup_teardown(store_open_creates_and_refuses_a_file, rt_setup,
                                        rt_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
