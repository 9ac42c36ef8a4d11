/* rel_list: the versions a host has, as an operator wants to see them. */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fileio.h"
#include "common/names.h"
#include "release/internal.h"

static int entry_cmp(const void *a, const void *b)
{
    const rel_entry *x = a, *y = b;
    if (x->identity.staged_at != y->identity.staged_at)
        return x->identity.staged_at < y->identity.staged_at ? -1 : 1;
    return strcmp(x->identity.version, y->identity.version);
}

/* The problem text is for a person; a cut tail is better than no entry. */
static void copy_truncated(char *out, size_t out_size, const char *text)
{
    size_t len = strnlen(text, out_size - 1);
    memcpy(out, text, len);
    out[len] = '\0';
}

int rel_list_open(rel_store *store, int host_dirfd, const char *host, rel_entry **entries,
                  size_t *n, act_error *err)
{
    assert(store);
    assert(host);
    assert(entries);
    assert(n);
    *entries = NULL;
    *n = 0;
    char live[REL_NAME_SIZE] = "";
    act_error live_err = {0};
    /* No live link, or a damaged one, just means nothing is marked live. */
    (void)rel_live_read(store, host_dirfd, host, live, &live_err);

    _cleanup_(closedirp) DIR *dir = act_opendir_at(host_dirfd, ".");
    if (!dir)
        return act_error_set(err, errno, "host %s: cannot read %s/%s: %s", host, store->path, host,
                             strerror(errno));
    _cleanup_free_ rel_entry *list = NULL;
    size_t count = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(dir))) {
        /* Hidden names are staging, trash and temporary links; "live" is the
         * link; anything else that is not a valid version name is not ours. */
        if (!act_name_is_valid(de->d_name) || strcmp(de->d_name, REL_LIVE_NAME) == 0)
            continue;
        _cleanup_close_ int version_fd =
            openat(host_dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (version_fd < 0)
            continue;
        if (count == cap) {
            size_t grown = cap ? cap * 2 : 8;
            rel_entry *bigger = realloc(list, grown * sizeof(rel_entry));
            if (!bigger)
                return act_error_set(err, ENOMEM, "host %s: out of memory listing versions", host);
            list = bigger;
            cap = grown;
        }
        rel_entry *entry = &list[count++];
        memset(entry, 0, sizeof(*entry));
        char where[PATH_MAX];
        snprintf(where, sizeof(where), "%s/%s/%s/%s", store->path, host, de->d_name,
                 REL_MANIFEST_NAME);
        rel_manifest m;
        act_error manifest_err = {0};
        if (rel_manifest_read(version_fd, where, host, de->d_name, &m, &manifest_err) == 0) {
            rel_manifest_identity(&m, NULL, &entry->identity);
            entry->manifest_ok = true;
            rel_manifest_clear(&m);
        } else {
            copy_truncated(entry->identity.version, sizeof(entry->identity.version), de->d_name);
            copy_truncated(entry->problem, sizeof(entry->problem), manifest_err.message);
        }
        entry->is_live = strcmp(de->d_name, live) == 0;
    }
    if (count > 1)
        qsort(list, count, sizeof(rel_entry), entry_cmp);
    *entries = TAKE_PTR(list);
    *n = count;
    return 0;
}

int rel_list(rel_store *store, const char *host, rel_entry **entries, size_t *n, act_error *err)
{
    assert(store);
    assert(entries);
    assert(n);
    *entries = NULL;
    *n = 0;
    int r = act_name_check("host", host, err);
    if (r < 0)
        return r;
    _cleanup_close_ int host_dirfd = rel_host_open_if_staged(store, host, err);
    if (host_dirfd == -ENOENT)
        return 0;
    if (host_dirfd < 0)
        return host_dirfd;
    return rel_list_open(store, host_dirfd, host, entries, n, err);
}
