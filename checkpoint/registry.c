/* Checkpoints in a registry (Checkpoints=docker://REGISTRY/NAMESPACE).
 *
 * Each host's checkpoints are artifacts of the repository NAMESPACE/HOST
 * (image/artifact.h): one manifest per checkpoint, tagged with its id, its
 * single layer the tar+zstd archive, whose digest is the archive's SHA-256
 * that the claim names; what the sidecar of a directory says is in the
 * manifest's annotations. A checkpoint is written into the spool first (as
 * a directory's would be), pushed, and the spool's copy removed; a restore
 * fetches the blob by that digest into an unlinked file of the spool,
 * verified as it streams and again as it is extracted, so a registry that
 * serves other bytes changes nothing. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/internal.h"
#include "common/cleanup.h"
#include "common/cleanup_json.h"
#include "common/strv.h"
#include "image/artifact.h"

#define ARTIFACT_TYPE "application/vnd.activator.checkpoint.v1+json"
#define LAYER_TYPE "application/vnd.activator.checkpoint.layer.v1.tar+zstd"
#define NOTE_GENERATION "org.activator.checkpoint.generation"
#define NOTE_BOX "org.activator.checkpoint.box"
#define NOTE_STAMP "org.activator.checkpoint.stamp-usec"

typedef char manifest_digest[80];

static img_registry_options options_of(const ckpt_place *place)
{
    return (img_registry_options){
        .auth_file = place->auth_file,
        .insecure = (const char *const *)place->insecure,
        .n_insecure = act_strv_length(place->insecure),
        .timeout_sec = 30,
    };
}

static void repository_of(const ckpt_place *place, const char *host, char *out, size_t size)
{
    snprintf(out, size, "%s/%s", place->namespace, host);
}

/* The spool's copy of a checkpoint: archive and sidecar. */
static void remove_spooled(const ckpt_place *place, const char *host, const char *id)
{
    act_error ignored = {0};
    _cleanup_close_ int host_dirfd = ckpt_open_host_dir(place->spool, host, false, &ignored);
    if (host_dirfd < 0)
        return;
    char name[CKPT_ID_SIZE + 16];
    snprintf(name, sizeof(name), "%s%s", id, CKPT_ARCHIVE_SUFFIX);
    (void)unlinkat(host_dirfd, name, 0);
    snprintf(name, sizeof(name), "%s%s", id, CKPT_SIDECAR_SUFFIX);
    (void)unlinkat(host_dirfd, name, 0);
}

/* The spool, made on first use: it is this box's, under its state
 * directory. */
static int make_spool(const ckpt_place *place, act_error *err)
{
    if (mkdir(place->spool, 0700) < 0 && errno != EEXIST)
        return act_error_set(err, errno, "cannot make the checkpoint spool %s: %s", place->spool,
                             strerror(errno));
    return 0;
}

int ckpt_registry_write(const ckpt_place *place, const char *host, const char *state_dir,
                        uint64_t generation, const char *box, const atomic_bool *cancel,
                        ckpt_info *out, act_error *err)
{
    int r = make_spool(place, err);
    if (r < 0)
        return r;
    r = ckpt_write(place->spool, host, state_dir, generation, box, cancel, out, err);
    if (r < 0)
        return r;
    char path[4400], repository[1400], digest[80], generation_text[32], stamp_text[32];
    snprintf(path, sizeof(path), "%s/%s/%s%s", place->spool, host, out->id, CKPT_ARCHIVE_SUFFIX);
    repository_of(place, host, repository, sizeof(repository));
    snprintf(digest, sizeof(digest), "sha256:%s", out->sha256);
    snprintf(generation_text, sizeof(generation_text), "%" PRIu64, out->generation);
    snprintf(stamp_text, sizeof(stamp_text), "%" PRIu64, out->stamp_usec);
    const img_annotation notes[] = {
        {NOTE_GENERATION, generation_text}, {NOTE_BOX, out->box}, {NOTE_STAMP, stamp_text}};
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        r = act_error_set(err, errno, "cannot open %s: %s", path, strerror(errno));
    } else {
        img_artifact artifact = {.repository = repository,
                                 .tag = out->id,
                                 .artifact_type = ARTIFACT_TYPE,
                                 .layer_media_type = LAYER_TYPE,
                                 .fd = fd,
                                 .size = out->size,
                                 .digest = digest,
                                 .annotations = notes,
                                 .n_annotations = sizeof(notes) / sizeof(notes[0])};
        img_registry_options options = options_of(place);
        char pushed[IMG_DIGEST_SIZE];
        r = img_artifact_push(&artifact, &options, place->chunk_bytes, pushed, err);
        close(fd);
    }
    remove_spooled(place, host, out->id);
    if (r < 0)
        return act_error_prefix(err,
                                "checkpoint %s of host %s was written but not pushed to %s; the "
                                "claim keeps naming the one before",
                                out->id, host, repository);
    return 0;
}

static const char *annotation(json_object *notes, const char *key)
{
    json_object *value;
    return notes && json_object_object_get_ex(notes, key, &value) &&
                   json_object_is_type(value, json_type_string)
               ? json_object_get_string(value)
               : "";
}

/* What the manifest of id says of its checkpoint; false for a manifest
 * that is not one of ours. */
static bool info_of(json_object *manifest, const char *id, ckpt_info *info)
{
    json_object *layers, *layer, *digest, *size, *notes = NULL;
    if (!json_object_object_get_ex(manifest, "layers", &layers) ||
        !json_object_is_type(layers, json_type_array) || json_object_array_length(layers) != 1)
        return false;
    layer = json_object_array_get_idx(layers, 0);
    if (!json_object_object_get_ex(layer, "digest", &digest) ||
        !json_object_object_get_ex(layer, "size", &size))
        return false;
    const char *text = json_object_get_string(digest);
    if (strncmp(text, "sha256:", 7) != 0 || strlen(text + 7) != CKPT_DIGEST_SIZE - 1)
        return false;
    json_object_object_get_ex(manifest, "annotations", &notes);
    *info = (ckpt_info){.size = (uint64_t)json_object_get_int64(size)};
    snprintf(info->id, sizeof(info->id), "%s", id);
    snprintf(info->sha256, sizeof(info->sha256), "%s", text + 7);
    snprintf(info->box, sizeof(info->box), "%s", annotation(notes, NOTE_BOX));
    info->generation = strtoull(annotation(notes, NOTE_GENERATION), NULL, 10);
    info->stamp_usec = strtoull(annotation(notes, NOTE_STAMP), NULL, 10);
    return true;
}

typedef struct listed {
    ckpt_info info; /* first: sorted as a ckpt_info */
    manifest_digest manifest;
} listed;

static int listed_newest_first(const void *a, const void *b)
{
    return ckpt_newest_first(&((const listed *)a)->info, &((const listed *)b)->info);
}

int ckpt_registry_list(const ckpt_place *place, const char *host, ckpt_info **out, size_t *n,
                       char (**digests)[80], act_error *err)
{
    *out = NULL;
    *n = 0;
    if (digests)
        *digests = NULL;
    int r = act_name_check("host", host, err);
    if (r < 0)
        return r;
    char repository[1400];
    repository_of(place, host, repository, sizeof(repository));
    img_registry_options options = options_of(place);
    _cleanup_(act_strv_freep) char **tags = NULL;
    if ((r = img_artifact_tags(repository, &options, &tags, err)) < 0)
        return r;
    size_t count = act_strv_length(tags), kept = 0;
    _cleanup_free_ listed *items = calloc(count ? count : 1, sizeof(*items));
    if (!items)
        return act_error_set(err, ENOMEM, "out of memory");
    for (size_t i = 0; i < count; i++) {
        if (!act_name_is_valid(tags[i]))
            continue; /* not a checkpoint id: not ours */
        _cleanup_(json_object_putp) json_object *manifest = NULL;
        char digest[IMG_DIGEST_SIZE];
        r = img_artifact_manifest(repository, tags[i], &options, &manifest, digest, err);
        if (r == -ENOENT)
            continue; /* deleted since the list */
        if (r < 0)
            return r;
        if (!info_of(manifest, tags[i], &items[kept].info))
            continue;
        snprintf(items[kept].manifest, sizeof(items[kept].manifest), "%s", digest);
        kept++;
    }
    qsort(items, kept, sizeof(*items), listed_newest_first);
    ckpt_info *infos = calloc(kept ? kept : 1, sizeof(*infos));
    manifest_digest *manifests = calloc(kept ? kept : 1, sizeof(*manifests));
    if (!infos || !manifests) {
        free(infos);
        free(manifests);
        return act_error_set(err, ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < kept; i++) {
        infos[i] = items[i].info;
        memcpy(manifests[i], items[i].manifest, sizeof(manifests[i]));
    }
    *out = infos;
    *n = kept;
    if (digests)
        *digests = manifests;
    else
        free(manifests);
    return 0;
}

int ckpt_registry_prune(const ckpt_place *place, const char *host, unsigned keep,
                        const char *const *protected, size_t n_protected, act_error *err)
{
    _cleanup_free_ ckpt_info *items = NULL;
    _cleanup_free_ manifest_digest *manifests = NULL;
    size_t n = 0;
    int r = ckpt_registry_list(place, host, &items, &n, &manifests, err);
    if (r < 0 || n <= keep)
        return r;
    char repository[1400];
    repository_of(place, host, repository, sizeof(repository));
    img_registry_options options = options_of(place);
    int removed = 0;
    for (size_t i = keep; i < n; i++) {
        if (ckpt_is_protected(items[i].id, protected, n_protected))
            continue;
        if ((r = img_artifact_delete(repository, manifests[i], &options, err)) < 0)
            return act_error_prefix(err, "checkpoint %s of host %s", items[i].id, host);
        removed++;
    }
    return removed;
}

int ckpt_registry_restore(const ckpt_place *place, const char *host, const char *id,
                          const char *sha256, const char *state_dir, uid_t uid, gid_t gid,
                          act_error *err)
{
    int r = ckpt_check_restore(host, id, sha256, err);
    if (r < 0 || (r = make_spool(place, err)) < 0)
        return r;
    _cleanup_close_ int host_dirfd = ckpt_open_host_dir(place->spool, host, true, err);
    if (host_dirfd < 0)
        return host_dirfd;
    /* Unlinked at once: a crash leaves nothing in the spool. A filesystem
     * without O_TMPFILE gets a named file, unlinked as soon as it is made. */
    _cleanup_close_ int fd = openat(host_dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR)) {
        char name[4400];
        snprintf(name, sizeof(name), "%s/%s/.restore-XXXXXX", place->spool, host);
        fd = mkostemp(name, O_CLOEXEC);
        if (fd >= 0)
            unlink(name);
    }
    if (fd < 0)
        return act_error_set(err, errno, "cannot make a file in %s/%s: %s", place->spool, host,
                             strerror(errno));
    char repository[1400], digest[80];
    repository_of(place, host, repository, sizeof(repository));
    snprintf(digest, sizeof(digest), "sha256:%s", sha256);
    img_registry_options options = options_of(place);
    r = img_blob_download(repository, digest, 0, &options, fd, err);
    if (r == -ENOENT)
        return act_error_set(err, ENOENT,
                             "checkpoint %s of host %s is missing: %s has no blob %s (nothing "
                             "was restored)",
                             id, host, repository, digest);
    if (r < 0)
        return act_error_prefix(err, "checkpoint %s of host %s: nothing was restored", id, host);
    return ckpt_restore_verified(fd, id, sha256, state_dir, uid, gid, err);
}
