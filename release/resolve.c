/* rel_resolve: the last check before an exec. It reads the live link once,
 * opens the executable without following links, and hashes the open fd, so
 * the fd handed back is exactly what was verified. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/names.h"
#include "release/internal.h"

void rel_resolved_release(rel_resolved *resolved)
{
    if (!resolved)
        return;
    act_closep(&resolved->exec_fd);
    resolved->exec_fd = -1;
}

static int check_pin(const rel_pin *pin, act_error *err)
{
    int r = rel_version_check(pin->version, err);
    if (r < 0)
        return act_error_prefix(err, "pin");
    if (!rel_digest_is_valid(pin->digest))
        return act_error_set(err, EINVAL,
                             "pin for version %s: digest is not 64 lowercase hex "
                             "digits; a pin names a build digest",
                             pin->version);
    return 0;
}

/* Opens the executable and checks what kind of file it is; the content is
 * checked by the caller. */
static int open_executable(const char *where, int version_fd, const char *exec_path, act_error *err)
{
    _cleanup_close_ int fd = rel_open_beneath(version_fd, exec_path, O_RDONLY | O_NOCTTY);
    if (fd < 0) {
        if (fd == -ELOOP)
            return act_error_set(err, ELOOP,
                                 "%s: executable %s is a symlink or lies under one; "
                                 "a build must hold the real file; restage the version",
                                 where, exec_path);
        if (fd == -ENOENT || fd == -ENOTDIR)
            return act_error_set(err, ENOENT,
                                 "%s: executable %s is missing from the build; "
                                 "restage the version",
                                 where, exec_path);
        return act_error_set(err, -fd, "%s: cannot open executable %s: %s", where, exec_path,
                             strerror(-fd));
    }
    struct stat st;
    if (fstat(fd, &st) < 0)
        return act_error_set(err, errno, "%s: cannot stat executable %s: %s", where, exec_path,
                             strerror(errno));
    if (!S_ISREG(st.st_mode))
        return act_error_set(err, EPERM, "%s: executable %s is not a regular file", where,
                             exec_path);
    /* Anyone who can write the file could change what runs between this
     * hash and the exec; staged files are 0555 and owned by the stager. */
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        return act_error_set(err, EPERM,
                             "%s: executable %s is writable by %s (mode %04o); "
                             "refusing to run it; restage the version",
                             where, exec_path,
                             (st.st_mode & S_IWGRP) && (st.st_mode & S_IWOTH) ? "group and other"
                             : (st.st_mode & S_IWGRP)                         ? "group"
                                                                              : "other",
                             (unsigned)(st.st_mode & 07777));
    if (st.st_uid != 0 && st.st_uid != geteuid())
        return act_error_set(err, EPERM,
                             "%s: executable %s is owned by uid %u, neither root nor "
                             "this process's user; refusing to run it",
                             where, exec_path, (unsigned)st.st_uid);
    if (!(st.st_mode & 0111))
        return act_error_set(err, EPERM,
                             "%s: executable %s has no execute permission (mode "
                             "%04o); restage the version",
                             where, exec_path, (unsigned)(st.st_mode & 07777));
    return TAKE_FD(fd);
}

int rel_resolve(rel_store *store, const char *host, const rel_pin *pin, const char *exec_override,
                rel_resolved *out, act_error *err)
{
    assert(store);
    assert(out);
    memset(&out->identity, 0, sizeof(out->identity));
    out->exec_fd = -1;
    int r = act_name_check("host", host, err);
    if (r < 0)
        return r;
    if (pin && (r = check_pin(pin, err)) < 0)
        return act_error_prefix(err, "host %s", host);
    if (exec_override && (r = rel_build_path_check("executable override", exec_override, err)) < 0)
        return act_error_prefix(err, "host %s", host);

    _cleanup_close_ int host_dirfd = rel_host_open(store, host, false, err);
    if (host_dirfd < 0)
        return host_dirfd;
    char version[REL_NAME_SIZE];
    if (pin) {
        snprintf(version, sizeof(version), "%s", pin->version);
    } else {
        /* The one read of the live link: everything below uses this name, so
         * a promote racing with us changes nothing about this start. */
        r = rel_live_read(store, host_dirfd, host, version, err);
        if (r < 0)
            return r;
    }
    _cleanup_close_ int version_fd = rel_version_open(store, host_dirfd, host, version, err);
    if (version_fd < 0)
        return version_fd;

    char where[PATH_MAX];
    snprintf(where, sizeof(where), "%s/%s/%s/%s", store->path, host, version, REL_MANIFEST_NAME);
    _cleanup_(rel_manifest_clear) rel_manifest m = {0};
    r = rel_manifest_read(version_fd, where, host, version, &m, err);
    if (r < 0)
        return act_error_prefix(err, "host %s: version %s", host, version);

    char label[256];
    snprintf(label, sizeof(label), "host %s: version %s", host, version);
    const char *exec_path = exec_override ? exec_override : m.exec_path;
    const rel_file *exec = rel_manifest_find(&m, exec_path);
    if (!exec || exec->type != REL_ENTRY_FILE)
        return act_error_set(err, ENOENT,
                             "%s: executable %s is not a file of the build (%s in %s); name a "
                             "regular file of the build (Exec=)",
                             label, exec_path,
                             exec ? (exec->type == REL_ENTRY_DIR ? "a directory" : "a symlink")
                                  : "not listed",
                             where);
    if (pin && strcmp(pin->digest, m.build_digest) != 0)
        return act_error_set(err, EKEYREJECTED,
                             "%s: the pin expects build digest %s but the staged build has %s; "
                             "the version was restaged or the pin is stale; pin the build that "
                             "is staged or restage the pinned one",
                             label, pin->digest, m.build_digest);
    _cleanup_close_ int fd = open_executable(label, version_fd, exec_path, err);
    if (fd < 0)
        return fd;
    char actual[REL_DIGEST_SIZE];
    uint64_t actual_size = 0;
    r = rel_digest_fd(fd, actual, &actual_size, err);
    if (r < 0)
        return act_error_prefix(err, "%s: executable %s", label, exec_path);
    if (strcmp(actual, exec->digest) != 0 || actual_size != exec->size)
        return act_error_set(err, EBADMSG,
                             "%s: executable %s does not match its manifest: expected SHA-256 "
                             "%s (%llu bytes), actual SHA-256 %s (%llu bytes); the staged file "
                             "was changed after staging; restage the version",
                             label, exec_path, exec->digest, (unsigned long long)exec->size,
                             actual, (unsigned long long)actual_size);
    rel_manifest_identity(&m, exec, &out->identity);
    out->exec_fd = TAKE_FD(fd);
    return 0;
}
