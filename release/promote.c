/* rel_promote: repoint the live link, atomically and only at a build that
 * verifies. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fileio.h"
#include "common/names.h"
#include "release/internal.h"

int rel_promote(rel_store *store, const char *host, const char *version, act_error *err)
{
    assert(store);
    int r = rel_names_check(host, version, err);
    if (r < 0)
        return r;

    _cleanup_close_ int host_dirfd = rel_host_open(store, host, false, err);
    if (host_dirfd < 0)
        return host_dirfd;
    /* Held across verify and rename, so a gc cannot remove the version
     * between the check and the live link naming it. */
    r = rel_lock_host(store, host_dirfd, host, err);
    if (r < 0)
        return r;
    r = rel_verify_open(store, host_dirfd, host, version, err);
    if (r < 0)
        return act_error_prefix(err, "host %s: refusing to make version %s live", host, version);

    char suffix[9], tmp_name[64];
    rel_random_suffix(suffix);
    snprintf(tmp_name, sizeof(tmp_name), "%s%s", REL_LIVE_TMP_PREFIX, suffix);
    /* A relative target keeps the tree relocatable and lets rel_live_read
     * insist on a bare version name. */
    if (symlinkat(version, host_dirfd, tmp_name) < 0)
        return act_error_set(err, errno, "host %s: cannot create a new live link in %s/%s: %s",
                             host, store->path, host, strerror(errno));
    if (renameat(host_dirfd, tmp_name, host_dirfd, REL_LIVE_NAME) < 0) {
        r = act_error_set(err, errno, "host %s: cannot replace %s/%s/live: %s", host, store->path,
                          host, strerror(errno));
        unlinkat(host_dirfd, tmp_name, 0);
        return r;
    }
    r = act_fsync_dir(host_dirfd, err);
    if (r < 0)
        return act_error_prefix(err, "host %s: live now names %s but may not survive a crash", host,
                                version);
    return 0;
}
