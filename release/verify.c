/* rel_verify: re-hash every file of a build and check the build holds
 * exactly what its manifest lists: the same files, directories and
 * symlinks (format 2), with the same modes and targets. */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fileio.h"
#include "common/names.h"
#include "release/internal.h"

typedef struct verify_walk {
    const rel_manifest *m;
    bool *seen; /* parallel to m->files */
    const char *label;
    act_error *err;
} verify_walk;

/* The manifest's entry for what is at rel_path on disk (of type type),
 * marked seen; NULL with err set when the manifest does not list it so. */
static const rel_file *listed_entry(verify_walk *walk, const char *rel_path, rel_entry_type type,
                                    const struct stat *st)
{
    act_error *err = walk->err;
    const rel_file *entry = rel_manifest_find(walk->m, rel_path);
    if (!entry) {
        act_error_set(err, type == REL_ENTRY_SYMLINK ? ELOOP : EBADMSG,
                      "%s: %s %s is in the build but not in its manifest; something was added "
                      "after staging; restage the version",
                      walk->label, rel_entry_type_name(type), rel_path);
        return NULL;
    }
    if (entry->type != type) {
        act_error_set(err, type == REL_ENTRY_SYMLINK ? ELOOP : EBADMSG,
                      "%s: %s is a %s in the build but a %s in its manifest; it was replaced "
                      "after staging; restage the version",
                      walk->label, rel_path, rel_entry_type_name(type),
                      rel_entry_type_name(entry->type));
        return NULL;
    }
    unsigned mode = (unsigned)st->st_mode & 07777;
    if (walk->m->format != REL_MANIFEST_FORMAT_FILES && type != REL_ENTRY_SYMLINK &&
        mode != entry->mode) {
        act_error_set(err, EBADMSG,
                      "%s: %s has mode %04o, its manifest says %04o; it was changed after "
                      "staging; restage the version",
                      walk->label, rel_path, mode, entry->mode);
        return NULL;
    }
    walk->seen[entry - walk->m->files] = true;
    return entry;
}

static int check_symlink(verify_walk *walk, int dirfd, const char *name, const char *rel_path,
                         const struct stat *st)
{
    act_error *err = walk->err;
    if (walk->m->format == REL_MANIFEST_FORMAT_FILES)
        return act_error_set(err, ELOOP,
                             "%s: %s is a symlink; a build of this manifest format holds only "
                             "real files; restage the version",
                             walk->label, rel_path);
    const rel_file *entry = listed_entry(walk, rel_path, REL_ENTRY_SYMLINK, st);
    if (!entry)
        return -err->errnum;
    char target[REL_PATH_SIZE + 1];
    ssize_t n = readlinkat(dirfd, name, target, sizeof(target) - 1);
    if (n < 0)
        return act_error_set(err, errno, "%s: cannot read symlink %s: %s", walk->label, rel_path,
                             strerror(errno));
    target[n] = '\0';
    if (strcmp(target, entry->target) != 0)
        return act_error_set(err, EBADMSG,
                             "%s: symlink %s leads to %s, its manifest says %s; it was changed "
                             "after staging; restage the version",
                             walk->label, rel_path, target, entry->target);
    return 0;
}

static int check_file(verify_walk *walk, int dirfd, const char *name, const char *rel_path,
                      const struct stat *st)
{
    act_error *err = walk->err;
    const rel_file *file = listed_entry(walk, rel_path, REL_ENTRY_FILE, st);
    if (!file)
        return -err->errnum;
    _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return act_error_set(err, errno, "%s: cannot open %s: %s", walk->label, rel_path,
                             strerror(errno));
    char actual[REL_DIGEST_SIZE];
    uint64_t size = 0;
    int r = rel_digest_fd(fd, actual, &size, err);
    if (r < 0)
        return act_error_prefix(err, "%s: %s", walk->label, rel_path);
    if (size != file->size || strcmp(actual, file->digest) != 0)
        return act_error_set(err, EBADMSG,
                             "%s: file %s does not match its manifest: expected SHA-256 %s (%llu "
                             "bytes), actual SHA-256 %s (%llu bytes); restage the version",
                             walk->label, rel_path, file->digest, (unsigned long long)file->size,
                             actual, (unsigned long long)size);
    return 0;
}

static int walk_dir(verify_walk *walk, int dirfd, const char *prefix, int depth)
{
    act_error *err = walk->err;
    if (depth > REL_MAX_DEPTH)
        return act_error_set(err, ELOOP, "%s: directories nest deeper than %d levels", walk->label,
                             REL_MAX_DEPTH);
    _cleanup_(closedirp) DIR *dir = act_opendir_at(dirfd, ".");
    if (!dir)
        return act_error_set(err, errno, "%s: cannot read the build: %s", walk->label,
                             strerror(errno));
    struct dirent *de;
    while ((de = readdir(dir))) {
        const char *name = de->d_name;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
            continue;
        if (depth == 0 && strcmp(name, REL_MANIFEST_NAME) == 0)
            continue;
        char rel_path[REL_PATH_SIZE];
        int n = prefix[0] ? snprintf(rel_path, sizeof(rel_path), "%s/%s", prefix, name)
                          : snprintf(rel_path, sizeof(rel_path), "%s", name);
        if (n < 0 || (size_t)n >= sizeof(rel_path))
            return act_error_set(err, EBADMSG,
                                 "%s: a path under %s is too long to be in a "
                                 "manifest; something was added after staging",
                                 walk->label, prefix);
        struct stat st;
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            return act_error_set(err, errno, "%s: cannot stat %s: %s", walk->label, rel_path,
                                 strerror(errno));
        int r;
        if (S_ISDIR(st.st_mode)) {
            /* Format 1 did not list directories. */
            if (walk->m->format != REL_MANIFEST_FORMAT_FILES &&
                !listed_entry(walk, rel_path, REL_ENTRY_DIR, &st))
                return -err->errnum;
            _cleanup_close_ int child =
                openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (child < 0)
                return act_error_set(err, errno, "%s: cannot open %s: %s", walk->label, rel_path,
                                     strerror(errno));
            r = walk_dir(walk, child, rel_path, depth + 1);
        } else if (S_ISREG(st.st_mode)) {
            r = check_file(walk, dirfd, name, rel_path, &st);
        } else if (S_ISLNK(st.st_mode)) {
            r = check_symlink(walk, dirfd, name, rel_path, &st);
        } else {
            r = act_error_set(err, EPERM,
                              "%s: %s is not a regular file, directory or symlink; restage "
                              "the version",
                              walk->label, rel_path);
        }
        if (r < 0)
            return r;
    }
    return 0;
}

int rel_verify_open(rel_store *store, int host_dirfd, const char *host, const char *version,
                    act_error *err)
{
    assert(store);
    assert(host);
    assert(version);
    _cleanup_close_ int version_fd = rel_version_open(store, host_dirfd, host, version, err);
    if (version_fd < 0)
        return version_fd;
    char where[PATH_MAX], label[256];
    snprintf(where, sizeof(where), "%s/%s/%s/%s", store->path, host, version, REL_MANIFEST_NAME);
    snprintf(label, sizeof(label), "host %s: version %s", host, version);
    _cleanup_(rel_manifest_clear) rel_manifest m = {0};
    int r = rel_manifest_read(version_fd, where, host, version, &m, err);
    if (r < 0)
        return act_error_prefix(err, "%s", label);
    _cleanup_free_ bool *seen = calloc(m.n_files, sizeof(bool));
    if (!seen)
        return act_error_set(err, ENOMEM, "%s: out of memory verifying", label);
    verify_walk walk = {.m = &m, .seen = seen, .label = label, .err = err};
    r = walk_dir(&walk, version_fd, "", 0);
    for (size_t i = 0; r == 0 && i < m.n_files; i++)
        if (!seen[i])
            r = act_error_set(err, EBADMSG,
                              "%s: %s %s listed in the manifest is missing from "
                              "the build; restage the version",
                              label, rel_entry_type_name(m.files[i].type), m.files[i].path);
    return r;
}

int rel_verify(rel_store *store, const char *host, const char *version, act_error *err)
{
    assert(store);
    int r = rel_names_check(host, version, err);
    if (r < 0)
        return r;
    _cleanup_close_ int host_dirfd = rel_host_open(store, host, false, err);
    if (host_dirfd < 0)
        return host_dirfd;
    return rel_verify_open(store, host_dirfd, host, version, err);
}
