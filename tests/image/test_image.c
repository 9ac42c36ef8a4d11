/* image/: OCI image layouts made by umoci (its layers, its whiteouts),
 * read, verified and flattened, and the tree staged and run. */
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

#include <json-c/json.h>

#include "image/image.h"
#include "image/internal.h"
#include "release/release.h"
#include "tests/image/layouts.h"
#include "tests/release/helpers.h"

static void layers_apply_with_whiteouts_and_links_and_the_tree_stages(void **state)
{
    rt_fixture *fx = *state;
    char *layout = image_make_layout(fx);
    char reference[PATH_MAX + 16];
    snprintf(reference, sizeof(reference), "oci:%s:v2", layout);
    act_error err = {0};
    img_image image;
    if (img_open(reference, &image, &err) < 0)
        fail_msg("open: %s", err.message);
    assert_int_equal(image.n_layers, 2);
    assert_int_equal(image.layers[0].compression, IMG_LAYER_GZIP);
    assert_int_equal(strncmp(image.manifest_digest, "sha256:", 7), 0);

    char *flat = rt_join(fx->tmp, "flat");
    assert_int_equal(mkdir(flat, 0700), 0);
    if (img_flatten(&image, flat, &err) < 0)
        fail_msg("flatten: %s", err.message);
    char path[PATH_MAX], target[PATH_MAX];
    /* The second layer's whiteouts removed a directory and a file. */
    snprintf(path, sizeof(path), "%s/gone", flat);
    assert_false(rt_exists(path));
    snprintf(path, sizeof(path), "%s/y/b", flat);
    assert_false(rt_exists(path));
    snprintf(path, sizeof(path), "%s/y/c", flat);
    assert_true(rt_exists(path));
    snprintf(path, sizeof(path), "%s/y/new", flat);
    assert_true(rt_exists(path));
    /* Symlinks: a relative one as it is, an absolute one made relative. */
    snprintf(path, sizeof(path), "%s/lib/libx.so", flat);
    ssize_t n = readlink(path, target, sizeof(target) - 1);
    assert_true(n > 0);
    target[n] = '\0';
    assert_string_equal(target, "libx.so.1");
    snprintf(path, sizeof(path), "%s/etc/abs", flat);
    n = readlink(path, target, sizeof(target) - 1);
    assert_true(n > 0);
    target[n] = '\0';
    assert_string_equal(target, "../lib/libx.so.1");

    /* The tree stages as a build, and runs. */
    rel_identity staged;
    if (rel_stage(fx->store, "web1", "v2", flat, "bin/app", &staged, &err) < 0)
        fail_msg("stage: %s", err.message);
    rt_promote_and_expect_output(fx, "web1", "v2", "rel-test-app 1.0\n");
    /* The hard link is a file of its own in the build. */
    char *staged_hard = rt_join(fx->releases, "web1/v2/bin/app-hard");
    struct stat st;
    assert_int_equal(lstat(staged_hard, &st), 0);
    assert_true(S_ISREG(st.st_mode));

    img_image_clear(&image);
    free(staged_hard);
    free(flat);
    free(layout);
}

static void references_tags_and_platforms_are_checked(void **state)
{
    rt_fixture *fx = *state;
    char *layout = image_make_layout(fx);
    char reference[PATH_MAX + 16];
    act_error err = {0};
    img_image image;
    /* Three images: no tag is not enough, and the message lists them. */
    snprintf(reference, sizeof(reference), "oci:%s", layout);
    assert_int_equal(img_open(reference, &image, &err), -ENOENT);
    assert_non_null(strstr(err.message, "v1, v2, arm"));
    snprintf(reference, sizeof(reference), "oci:%s:v9", layout);
    assert_int_equal(img_open(reference, &image, &err), -ENOENT);
    assert_non_null(strstr(err.message, "no image tagged v9"));
    snprintf(reference, sizeof(reference), "oci:%s:-x", layout);
    assert_int_equal(img_open(reference, &image, &err), -EINVAL);
    assert_non_null(strstr(err.message, "not a tag"));
    snprintf(reference, sizeof(reference), "oci:%s:arm", layout);
    assert_int_equal(img_open(reference, &image, &err), -ENOEXEC);
    assert_non_null(strstr(err.message, "linux/arm64"));
    snprintf(reference, sizeof(reference), "oci:%s/nowhere:v1", fx->tmp);
    assert_int_equal(img_open(reference, &image, &err), -ENOENT);
    assert_non_null(strstr(err.message, "index.json"));
    assert_int_equal(img_open("/srv/build", &image, &err), -EINVAL);
    free(layout);
}

/* The descriptor of the layout's image tagged tag, as index.json has it. */
static json_object *tagged_descriptor(json_object *index, const char *tag)
{
    json_object *manifests, *annotations, *name;
    assert_true(json_object_object_get_ex(index, "manifests", &manifests));
    for (size_t i = 0; i < json_object_array_length(manifests); i++) {
        json_object *m = json_object_array_get_idx(manifests, i);
        if (json_object_object_get_ex(m, "annotations", &annotations) &&
            json_object_object_get_ex(annotations, "org.opencontainers.image.ref.name", &name) &&
            strcmp(json_object_get_string(name), tag) == 0)
            return m;
    }
    fail_msg("no image tagged %s in index.json", tag);
    return NULL;
}

/* Adds to the layout an image index (a blob) naming the manifests of the
 * given tags with the given platforms, tagged as index_tag; returns
 * nothing, the layout is changed in place. umoci makes one platform's
 * images; the index over them is the test's own. */
static void add_index(const char *layout, const char *index_tag, const char *const *tags,
                      const char *const *architectures, size_t n)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/index.json", layout);
    json_object *index = json_object_from_file(path);
    assert_non_null(index);
    json_object *nested = json_object_new_object(), *list = json_object_new_array();
    json_object_object_add(nested, "schemaVersion", json_object_new_int(2));
    json_object_object_add(nested, "mediaType",
                           json_object_new_string("application/vnd.oci.image.index.v1+json"));
    for (size_t i = 0; i < n; i++) {
        json_object *entry = NULL;
        assert_int_equal(json_object_deep_copy(tagged_descriptor(index, tags[i]), &entry, NULL), 0);
        json_object_object_del(entry, "annotations");
        json_object *platform = json_object_new_object();
        json_object_object_add(platform, "architecture", json_object_new_string(architectures[i]));
        json_object_object_add(platform, "os", json_object_new_string("linux"));
        json_object_object_add(entry, "platform", platform);
        json_object_array_add(list, entry);
    }
    json_object_object_add(nested, "manifests", list);
    const char *text = json_object_to_json_string_ext(nested, JSON_C_TO_STRING_PLAIN);
    char digest[IMG_DIGEST_SIZE];
    assert_int_equal(img_sha256_digest(text, strlen(text), digest), 0);
    snprintf(path, sizeof(path), "%s/blobs/sha256/%s", layout, digest + 7);
    rt_write_file(path, text, strlen(text), 0644);
    json_object *descriptor = json_object_new_object();
    json_object_object_add(descriptor, "mediaType",
                           json_object_new_string("application/vnd.oci.image.index.v1+json"));
    json_object_object_add(descriptor, "digest", json_object_new_string(digest));
    json_object_object_add(descriptor, "size", json_object_new_int64((int64_t)strlen(text)));
    json_object *annotations = json_object_new_object();
    json_object_object_add(annotations, "org.opencontainers.image.ref.name",
                           json_object_new_string(index_tag));
    json_object_object_add(descriptor, "annotations", annotations);
    json_object *manifests;
    assert_true(json_object_object_get_ex(index, "manifests", &manifests));
    json_object_array_add(manifests, descriptor);
    snprintf(path, sizeof(path), "%s/index.json", layout);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(json_object_to_file_ext(path, index, JSON_C_TO_STRING_PLAIN), 0);
    json_object_put(nested);
    json_object_put(index);
}

/* An index of two platforms is followed to linux/amd64; one without it is
 * refused, naming what it has. */
static void an_index_is_followed_to_linux_amd64(void **state)
{
    rt_fixture *fx = *state;
    char *layout = image_make_layout(fx);
    const char *both[] = {"arm", "v1"}, *both_arch[] = {"arm64", "amd64"};
    add_index(layout, "multi", both, both_arch, 2);
    const char *arm_only[] = {"arm"}, *arm_arch[] = {"arm64"};
    add_index(layout, "armonly", arm_only, arm_arch, 1);
    char reference[PATH_MAX + 16], v1[PATH_MAX + 16];
    act_error err = {0};
    img_image image, expected;
    snprintf(v1, sizeof(v1), "oci:%s:v1", layout);
    if (img_open(v1, &expected, &err) < 0)
        fail_msg("open v1: %s", err.message);
    snprintf(reference, sizeof(reference), "oci:%s:multi", layout);
    if (img_open(reference, &image, &err) < 0)
        fail_msg("open the index: %s", err.message);
    assert_string_equal(image.manifest_digest, expected.manifest_digest);
    img_image_clear(&image);
    img_image_clear(&expected);
    snprintf(reference, sizeof(reference), "oci:%s:armonly", layout);
    assert_int_equal(img_open(reference, &image, &err), -ENOEXEC);
    assert_non_null(strstr(err.message, "the index has: linux/arm64"));
    free(layout);
}

/* An opaque directory (".wh..wh..opq", as docker and buildah write when a
 * directory is replaced): what the layers below put there goes, what the
 * same layer puts there stays. umoci writes per-file whiteouts only, so
 * the layer is a tar made by tar and added verbatim by umoci. */
static void an_opaque_directory_keeps_only_its_own_layer(void **state)
{
    rt_fixture *fx = *state;
    char *layout = image_make_layout(fx);
    image_run("cd %s && mkdir -p opq/y && touch opq/y/.wh..wh..opq && echo mine > opq/y/mine && "
              "tar -C opq -cf opq.tar y && umoci raw add-layer --image img:v1 --tag opq opq.tar",
              fx->tmp);
    char reference[PATH_MAX + 16];
    snprintf(reference, sizeof(reference), "oci:%s:opq", layout);
    act_error err = {0};
    img_image image;
    if (img_open(reference, &image, &err) < 0)
        fail_msg("open: %s", err.message);
    char *flat = rt_join(fx->tmp, "flat");
    assert_int_equal(mkdir(flat, 0700), 0);
    if (img_flatten(&image, flat, &err) < 0)
        fail_msg("flatten: %s", err.message);
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/y/b", flat);
    assert_false(rt_exists(path));
    snprintf(path, sizeof(path), "%s/y/c", flat);
    assert_false(rt_exists(path));
    snprintf(path, sizeof(path), "%s/y/mine", flat);
    assert_true(rt_exists(path));
    snprintf(path, sizeof(path), "%s/y/.wh..wh..opq", flat);
    assert_false(rt_exists(path));
    snprintf(path, sizeof(path), "%s/lib/libx.so.1", flat);
    assert_true(rt_exists(path));
    img_image_clear(&image);
    free(flat);
    free(layout);
}

/* Layers with entries a build may not hold, made by tar and added verbatim
 * by umoci: a name that climbs out of the root, a set-user-ID file, a
 * fifo. Each is refused naming the entry, and nothing lands outside. */
static void layer_entries_a_build_may_not_hold_are_refused(void **state)
{
    rt_fixture *fx = *state;
    char *layout = image_make_layout(fx);
    image_run("cd %s && mkdir -p bad/d && echo x > bad/d/f && cp /bin/true bad/d/su && "
              "chmod 4755 bad/d/su && mkfifo bad/d/pipe && cd bad && "
              "tar -cPf ../esc.tar --transform 's,^d/f$,../../escaped,' d/f && "
              "tar -cf ../suid.tar d/su && tar -cf ../fifo.tar d/pipe && cd .. && "
              "for t in esc suid fifo; do umoci raw add-layer --image img:v1 --tag $t $t.tar; "
              "done",
              fx->tmp);
    static const struct {
        const char *tag, *words;
    } bad[] = {
        {"esc", "\"../../escaped\" has a \"..\" component"},
        {"suid", "\"d/su\" is set-user-ID"},
        {"fifo", "\"d/pipe\" is a device, fifo or socket"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char reference[PATH_MAX + 16], flat[PATH_MAX];
        snprintf(reference, sizeof(reference), "oci:%s:%s", layout, bad[i].tag);
        snprintf(flat, sizeof(flat), "%s/flat-%s", fx->tmp, bad[i].tag);
        act_error err = {0};
        img_image image;
        if (img_open(reference, &image, &err) < 0)
            fail_msg("open %s: %s", bad[i].tag, err.message);
        assert_int_equal(mkdir(flat, 0700), 0);
        assert_int_equal(img_flatten(&image, flat, &err), -EPERM);
        if (!strstr(err.message, bad[i].words))
            fail_msg("%s: the error \"%s\" does not say %s", bad[i].tag, err.message, bad[i].words);
        img_image_clear(&image);
    }
    /* Where <tmp>/flat-esc/../../escaped would have landed. */
    char escaped[PATH_MAX];
    snprintf(escaped, sizeof(escaped), "%s/../escaped", fx->tmp);
    assert_false(rt_exists(escaped));
    free(layout);
}

/* A layer blob changed in the layout (its gzip header's time field, so it
 * still unpacks) is refused by its digest. */
static void a_changed_blob_is_refused(void **state)
{
    rt_fixture *fx = *state;
    char *layout = image_make_layout(fx);
    char reference[PATH_MAX + 16];
    snprintf(reference, sizeof(reference), "oci:%s:v1", layout);
    act_error err = {0};
    img_image image;
    if (img_open(reference, &image, &err) < 0)
        fail_msg("open: %s", err.message);
    char blob[PATH_MAX + 128];
    snprintf(blob, sizeof(blob), "%s/blobs/sha256/%s", layout, image.layers[0].digest + 7);
    rt_flip_byte(blob, 5);
    char *flat = rt_join(fx->tmp, "flat");
    assert_int_equal(mkdir(flat, 0700), 0);
    assert_int_equal(img_flatten(&image, flat, &err), -EBADMSG);
    assert_non_null(strstr(err.message, image.layers[0].digest));
    assert_non_null(strstr(err.message, "copy the image again"));
    img_image_clear(&image);
    free(flat);
    free(layout);
}

int main(int argc, char **argv)
{
    rt_parse_args(argc, argv);
    if (system("command -v umoci >/dev/null") != 0) {
        fprintf(stderr, "test-image: umoci is not installed (scripts/install-deps.sh); skipped\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(layers_apply_with_whiteouts_and_links_and_the_tree_stages,
                                        rt_setup, rt_teardown),
        cmocka_unit_test_setup_teardown(references_tags_and_platforms_are_checked, rt_setup,
                                        rt_teardown),
        cmocka_unit_test_setup_teardown(an_index_is_followed_to_linux_amd64, rt_setup, rt_teardown),
        cmocka_unit_test_setup_teardown(an_opaque_directory_keeps_only_its_own_layer, rt_setup,
                                        rt_teardown),
        cmocka_unit_test_setup_teardown(layer_entries_a_build_may_not_hold_are_refused, rt_setup,
                                        rt_teardown),
        cmocka_unit_test_setup_teardown(a_changed_blob_is_refused, rt_setup, rt_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
