/* Applying an image's layers into one tree (image.h): each layer's blob
 * streamed through its digest into libarchive, with the OCI whiteouts. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/libarchive.h"
#include "common/fileio.h"
#include "common/sha256.h"
#include "image/internal.h"

#define WHITEOUT_PREFIX ".wh."
#define OPAQUE_MARKER ".wh..wh..opq"

/* The layer's blob as libarchive reads it, hashed on its way through, so
 * what is applied is what the digest names. */
static la_ssize_t blob_read(struct archive *a, void *data, const void **out)
{
    ssize_t n = act_sha256_reader_next(data, out);
    if (n < 0)
        archive_set_error(a, (int)-n, "cannot read the blob: %s", strerror((int)-n));
    return n < 0 ? -1 : n;
}

/* One layer being applied. */
typedef struct layer_apply {
    const img_image *image;
    const img_layer *layer;
    size_t number; /* 1-based, for messages */
    const char *dst;
    /* The paths this layer made so far: an opaque directory keeps them. */
    char **made;
    size_t n_made, cap_made;
    act_error *err;
} layer_apply;

static int layer_error(layer_apply *la, int errnum, const char *entry, const char *why)
{
    return act_error_set(la->err, errnum, "image %s: layer %zu (%s): entry \"%s\" %s",
                         la->image->layout, la->number, la->layer->digest, entry, why);
}

static int archive_failed(layer_apply *la, struct archive *a)
{
    int errnum = archive_errno(a) > 0 ? archive_errno(a) : EIO;
    const char *why = archive_error_string(a);
    return act_error_set(la->err, errnum, "image %s: layer %zu (%s): %s", la->image->layout,
                         la->number, la->layer->digest, why ? why : strerror(errnum));
}

/* The entry's path relative to the image's root: "./" and "/" prefixes and
 * trailing slashes dropped; NULL (with why) for one with a ".." component
 * or no name. out is "" for the root itself. */
static const char *normalize(const char *name, char *out, size_t size, const char **why)
{
    while (name[0] == '.' && name[1] == '/')
        name += 2;
    while (name[0] == '/')
        name++;
    size_t len = strlen(name);
    while (len > 0 && name[len - 1] == '/')
        len--;
    if (len >= size) {
        *why = "is too long a path";
        return NULL;
    }
    memcpy(out, name, len);
    out[len] = '\0';
    if (strcmp(out, ".") == 0)
        out[0] = '\0';
    for (const char *p = out; *p;) {
        size_t part = strcspn(p, "/");
        if (part == 2 && p[0] == '.' && p[1] == '.') {
            *why = "has a \"..\" component";
            return NULL;
        }
        p += part;
        p += strspn(p, "/");
    }
    return out;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    /* Gently: a pull's work directory holds a whole build. */
    int r = flag == FTW_DP || flag == FTW_DNR ? rmdir(path) : act_unlink_gently(AT_FDCWD, path);
    return r < 0 && errno != ENOENT ? -1 : 0;
}

int img_remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISDIR(st.st_mode))
        return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
    return nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS) < 0 ? -errno : 0;
}

/* Whether this layer made rel or anything under it. */
static bool made_by_layer(const layer_apply *la, const char *rel)
{
    size_t len = strlen(rel);
    for (size_t i = 0; i < la->n_made; i++)
        if (strncmp(la->made[i], rel, len) == 0 &&
            (la->made[i][len] == '\0' || la->made[i][len] == '/'))
            return true;
    return false;
}

static int remember(layer_apply *la, const char *rel)
{
    if (la->n_made == la->cap_made) {
        size_t cap = la->cap_made ? la->cap_made * 2 : 64;
        char **grown = realloc(la->made, cap * sizeof(char *));
        if (!grown)
            return act_error_set(la->err, ENOMEM, "out of memory");
        la->made = grown;
        la->cap_made = cap;
    }
    la->made[la->n_made] = strdup(rel);
    if (!la->made[la->n_made])
        return act_error_set(la->err, ENOMEM, "out of memory");
    la->n_made++;
    return 0;
}

/* ".wh..wh..opq" in dir: what the layers below put in dir goes. */
static int apply_opaque(layer_apply *la, const char *dir, const char *entry)
{
    char path[2 * PATH_MAX];
    if ((size_t)snprintf(path, sizeof(path), "%s%s%s", la->dst, dir[0] ? "/" : "", dir) >=
        sizeof(path))
        return layer_error(la, ENAMETOOLONG, entry, "is too long a path");
    DIR *d = opendir(path);
    if (!d)
        return errno == ENOENT ? 0
                               : layer_error(la, errno, entry, "names a directory it cannot open");
    struct dirent *de;
    int r = 0;
    while (r == 0 && (de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char rel[2 * PATH_MAX], child[3 * PATH_MAX];
        if ((size_t)snprintf(rel, sizeof(rel), "%s%s%s", dir, dir[0] ? "/" : "", de->d_name) >=
                sizeof(rel) ||
            (size_t)snprintf(child, sizeof(child), "%s/%s", la->dst, rel) >= sizeof(child)) {
            r = layer_error(la, ENAMETOOLONG, entry, "empties a directory of too long a path");
            break;
        }
        if (made_by_layer(la, rel))
            continue;
        int removed = img_remove_tree(child);
        if (removed < 0)
            r = layer_error(la, -removed, entry, "cannot empty its directory");
    }
    closedir(d);
    return r;
}

/* ".wh.NAME" in dir: NAME of the layers below goes. */
static int apply_whiteout(layer_apply *la, const char *dir, const char *name, const char *entry)
{
    if (!name[0] || strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || strchr(name, '/'))
        return layer_error(la, EPROTO, entry, "is a whiteout of no file");
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof(path), "%s/%s%s%s", la->dst, dir, dir[0] ? "/" : "", name) >=
        sizeof(path))
        return layer_error(la, ENAMETOOLONG, entry, "is too long a path");
    int r = img_remove_tree(path);
    return r < 0 ? layer_error(la, -r, entry, "cannot remove what it whites out") : 0;
}

/* An absolute symlink target names a path of the image's root: made
 * relative to the link's directory, it leads there inside the build. */
static int relative_target(const char *rel, const char *target, char *out, size_t size)
{
    size_t depth = 0;
    for (const char *p = rel; *p; p++)
        depth += *p == '/';
    size_t used = 0;
    for (size_t i = 0; i < depth; i++)
        used += (size_t)snprintf(out + used, size > used ? size - used : 0, "../");
    while (*target == '/')
        target++;
    int n = snprintf(out + used, size > used ? size - used : 0, "%s", target[0] ? target : ".");
    if (n < 0 || used + (size_t)n >= size)
        return -ENAMETOOLONG;
    return 0;
}

/* Checks and rewrites one entry for the disk; 1 when it was a whiteout
 * (applied, nothing to write), 0 to write it, or an error. */
static int prepare_entry(layer_apply *la, struct archive_entry *entry, char *rel, size_t rel_size)
{
    const char *name = archive_entry_pathname(entry);
    const char *why = NULL;
    if (!name || !normalize(name, rel, rel_size, &why))
        return layer_error(la, EPERM, name ? name : "", why ? why : "has no name");
    char *slash = strrchr(rel, '/');
    const char *base = slash ? slash + 1 : rel;
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - rel) : 0, rel);
    if (strcmp(base, OPAQUE_MARKER) == 0)
        return apply_opaque(la, dir, name) < 0 ? -la->err->errnum : 1;
    if (strncmp(base, WHITEOUT_PREFIX, strlen(WHITEOUT_PREFIX)) == 0)
        return apply_whiteout(la, dir, base + strlen(WHITEOUT_PREFIX), name) < 0 ? -la->err->errnum
                                                                                 : 1;
    if (!rel[0])
        return 1; /* the root: the destination is it */
    mode_t type = archive_entry_filetype(entry);
    const char *hardlink = archive_entry_hardlink(entry);
    if (hardlink) {
        char link_rel[PATH_MAX], link_path[PATH_MAX + 4096];
        if (!normalize(hardlink, link_rel, sizeof(link_rel), &why) || !link_rel[0])
            return layer_error(la, EPERM, name, "is a hard link to no file of the image");
        snprintf(link_path, sizeof(link_path), "%s/%s", la->dst, link_rel);
        archive_entry_set_hardlink(entry, link_path);
    } else if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK) {
        return layer_error(la, EPERM, name,
                           "is a device, fifo or socket, which a build may not hold; leave it "
                           "out of the image");
    }
    mode_t perm = archive_entry_perm(entry);
    if (type == AE_IFREG && (perm & (S_ISUID | S_ISGID)))
        return layer_error(la, EPERM, name,
                           "is set-user-ID or set-group-ID, which a build may not hold; clear "
                           "the bit in the image");
    archive_entry_set_perm(entry, perm & 01777);
    if (type == AE_IFLNK) {
        const char *target = archive_entry_symlink(entry);
        if (target && target[0] == '/') {
            char relative[PATH_MAX];
            if (relative_target(rel, target, relative, sizeof(relative)) < 0)
                return layer_error(la, ENAMETOOLONG, name, "has too long a symlink target");
            archive_entry_set_symlink(entry, relative);
        }
    }
    char path[PATH_MAX + 4096];
    snprintf(path, sizeof(path), "%s/%s", la->dst, rel);
    archive_entry_set_pathname(entry, path);
    archive_entry_set_uid(entry, 0);
    archive_entry_set_gid(entry, 0);
    archive_entry_set_uname(entry, NULL);
    archive_entry_set_gname(entry, NULL);
    return 0;
}

/* The rest of the blob after the tar's end, hashed, and the digest of all
 * of it compared with the layer's. */
static int check_digest(layer_apply *la, act_sha256_reader *blob)
{
    char actual[ACT_SHA256_HEX_SIZE], what[64];
    snprintf(what, sizeof(what), "layer %zu", la->number);
    int r = act_sha256_reader_finish(blob, what, actual, la->err);
    if (r < 0)
        return act_error_prefix(la->err, "image %s", la->image->layout);
    if (strcmp(actual, la->layer->digest + 7) != 0)
        return act_error_set(la->err, EBADMSG,
                             "image %s: layer %zu has digest sha256:%s, not %s, the digest "
                             "its manifest names; the blob was changed or damaged; copy the "
                             "image again",
                             la->image->layout, la->number, actual, la->layer->digest);
    return 0;
}

static int apply_entries(layer_apply *la, struct archive *in, struct archive *out)
{
    for (;;) {
        struct archive_entry *entry;
        int r = archive_read_next_header(in, &entry);
        if (r == ARCHIVE_EOF)
            return 0;
        if (r < ARCHIVE_WARN)
            return archive_failed(la, in);
        char rel[PATH_MAX];
        r = prepare_entry(la, entry, rel, sizeof(rel));
        if (r < 0)
            return r;
        if (r == 1)
            continue;
        if (archive_write_header(out, entry) < ARCHIVE_WARN)
            return archive_failed(la, out);
        struct archive *failed =
            archive_entry_filetype(entry) == AE_IFREG && archive_entry_size(entry) > 0
                ? act_archive_copy_data(in, out)
                : NULL;
        if (failed)
            return archive_failed(la, failed);
        if (archive_write_finish_entry(out) < ARCHIVE_WARN)
            return archive_failed(la, out);
        if ((r = remember(la, rel)) < 0)
            return r;
    }
}

static int apply_layer(layer_apply *la)
{
    _cleanup_close_ int fd = img_blob_open(la->image->layout, la->layer->digest, la->err);
    if (fd < 0)
        return fd;
    __attribute__((cleanup(act_sha256_reader_clear))) act_sha256_reader blob = {0};
    _cleanup_(archive_read_freep) struct archive *in = archive_read_new();
    _cleanup_(archive_write_freep) struct archive *out = archive_write_disk_new();
    if (act_sha256_reader_init(&blob, fd) < 0 || !in || !out)
        return act_error_set(la->err, ENOMEM, "out of memory");
    archive_read_support_format_tar(in);
    if (la->layer->compression == IMG_LAYER_GZIP)
        archive_read_support_filter_gzip(in);
    else if (la->layer->compression == IMG_LAYER_ZSTD)
        archive_read_support_filter_zstd(in);
    /* Files replace the layers' below; nothing is extracted through a
     * symlink or above the root. */
    archive_write_disk_set_options(out, ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                                            ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_PERM |
                                            ARCHIVE_EXTRACT_UNLINK);
    if (archive_read_open(in, &blob, NULL, blob_read, NULL) != ARCHIVE_OK)
        return archive_failed(la, in);
    int r = apply_entries(la, in, out);
    if (r < 0)
        return r;
    if (archive_write_close(out) != ARCHIVE_OK)
        return archive_failed(la, out);
    return check_digest(la, &blob);
}

int img_flatten(const img_image *image, const char *dst_path, act_error *err)
{
    int r = 0;
    for (size_t i = 0; r == 0 && i < image->n_layers; i++) {
        layer_apply la = {.image = image,
                          .layer = &image->layers[i],
                          .number = i + 1,
                          .dst = dst_path,
                          .err = err};
        r = apply_layer(&la);
        for (size_t k = 0; k < la.n_made; k++)
            free(la.made[k]);
        free(la.made);
    }
    return r;
}
