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

static void copy_file(const char *from, const char *to)
{
    _cleanup_close_ int in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        fail_msg("open %s: %s", from, strerror(errno));
    _cleanup_close_ int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    if (out < 0)
        fail_msg("create %s: %s", to, strerror(errno));
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof(buf))) > 0)
        if (write(out, buf, (size_t)n) != n)
            fail_msg("write %s: %s", to, strerror(errno));
    if (n < 0)
        fail_msg("read %s: %s", from, strerror(errno));
}

void ah_stage_variant(dh_daemon *d, const char *host, const char *version, bool promote,
                      rel_identity *identity)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    snprintf(dir, sizeof(dir), "%s/variant-%s-%s", d->drv.dir, host, version);
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        fail_msg("mkdir %s: %s", dir, strerror(errno));
    snprintf(path, sizeof(path), "%s/act-e2e-app", dir);
    copy_file(DH_E2E_APP, path);
    /* The kernel loads only what the ELF headers name, so trailing bytes
     * change the digest and nothing else. */
    _cleanup_close_ int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0 || dprintf(fd, "\nvariant %s of %s\n", version, host) < 0)
        fail_msg("append to %s: %s", path, strerror(errno));
    dh_stage_file(d, host, version, path, promote, identity);
}
