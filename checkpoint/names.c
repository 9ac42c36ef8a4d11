/* Checkpoint URLs, ids and the per-host directory. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint/internal.h"
#include "common/cleanup.h"
#include "common/paths.h"
#include "common/text.h"

int ckpt_parse_url(const char *url, char **dir, act_error *err)
{
    static const char scheme[] = "dir://";
    if (!url || strncmp(url, scheme, sizeof(scheme) - 1) != 0) {
        char shown[ACT_TEXT_SHOW_MAX];
        act_text_show(url ? url : "", shown, sizeof(shown));
        return act_error_set(err, EINVAL,
                             "\"%s\" is not a checkpoint URL (write dir:///PATH, a directory "
                             "every box of the fleet mounts, or docker://REGISTRY/NAMESPACE)",
                             shown);
    }
    const char *path = url + sizeof(scheme) - 1;
    act_error path_err = {0};
    if (act_path_check_absolute(path, &path_err) < 0)
        return act_error_set(err, EINVAL, "%s (write dir:///PATH with an absolute PATH)",
                             path_err.message);
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        len--;
    char *copy = strndup(path, len);
    if (!copy)
        return act_error_set(err, ENOMEM, "out of memory");
    *dir = copy;
    return 0;
}

int ckpt_check_id(const char *id, act_error *err)
{
    return act_name_check("checkpoint id", id, err);
}

int ckpt_open_host_dir(const char *dir, const char *host, bool create, act_error *err)
{
    int r = act_name_check("host", host, err);
    if (r < 0)
        return r;
    _cleanup_close_ int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0)
        return act_error_set(err, errno,
                             "cannot open the checkpoint directory %s: %s (create it, or point "
                             "Checkpoints= at the directory the fleet shares)",
                             dir, strerror(errno));
    /* The archives hold the host's data, secrets included: only root reads
     * them. */
    if (create && mkdirat(dirfd, host, 0700) < 0 && errno != EEXIST)
        return act_error_set(err, errno, "cannot create %s/%s: %s", dir, host, strerror(errno));
    int fd = openat(dirfd, host, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return act_error_set(err, errno, "cannot open %s/%s: %s", dir, host, strerror(errno));
    return fd;
}

int ckpt_mint_id(uint64_t stamp_usec, char out[CKPT_ID_SIZE], act_error *err)
{
    uint32_t nonce;
    if (getrandom(&nonce, sizeof(nonce), 0) != (ssize_t)sizeof(nonce))
        return act_error_set(err, EIO, "cannot read random bytes for a checkpoint id: %s",
                             strerror(errno));
    time_t seconds = (time_t)(stamp_usec / 1000000);
    struct tm tm;
    if (!gmtime_r(&seconds, &tm))
        return act_error_set(err, EINVAL, "the clock is out of range");
    char when[32];
    strftime(when, sizeof(when), "%Y%m%dT%H%M%S", &tm);
    snprintf(out, CKPT_ID_SIZE, "%s.%06uZ-%08x", when, (unsigned)(stamp_usec % 1000000),
             (unsigned)nonce);
    return 0;
}
