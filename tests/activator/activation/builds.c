/* Builds the activation tests stage besides the harness's act-e2e-app. */
#include "activation.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"

void ah_stage_variant(dh_daemon *d, const char *host, const char *version, bool promote,
                      rel_identity *identity)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    snprintf(dir, sizeof(dir), "%s/variant-%s-%s", d->drv.dir, host, version);
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        fail_msg("mkdir %s: %s", dir, strerror(errno));
    snprintf(path, sizeof(path), "%s/act-e2e-app", dir);
    act_error err = {0};
    if (dd_copy_file(DH_E2E_APP, path, 0755, &err) < 0)
        fail_msg("%s", err.message);
    /* The kernel loads only what the ELF headers name, so trailing bytes
     * change the digest and nothing else. */
    _cleanup_close_ int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0 || dprintf(fd, "\nvariant %s of %s\n", version, host) < 0)
        fail_msg("append to %s: %s", path, strerror(errno));
    dh_stage_file(d, host, version, path, promote, identity);
}
