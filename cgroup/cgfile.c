/* Reading and writing cgroup control files. They are small and the kernel
 * applies a write as one unit, so one read or one write is the whole job. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup/internal.h"
#include "common/cleanup.h"

int cg_write_file_at(int dirfd, const char *name, const char *value)
{
    _cleanup_close_ int fd = openat(dirfd, name, O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -errno;
    size_t len = strlen(value);
    ssize_t n;
    do {
        n = write(fd, value, len);
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    return (size_t)n == len ? 0 : -EIO;
}

int cg_read_file_at(int dirfd, const char *name, char *buf, size_t size)
{
    _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -errno;
    size_t len = 0;
    while (len + 1 < size) {
        ssize_t n = read(fd, buf + len, size - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    return 0;
}

bool cg_parse_keyed(const char *text, const char *key, uint64_t *value)
{
    size_t key_len = strlen(key);
    for (const char *line = text; line && *line;) {
        if (strncmp(line, key, key_len) == 0 && line[key_len] == ' ') {
            char *end = NULL;
            errno = 0;
            unsigned long long v = strtoull(line + key_len + 1, &end, 10);
            if (errno == 0 && end != line + key_len + 1) {
                *value = v;
                return true;
            }
            return false;
        }
        line = strchr(line, '\n');
        if (line)
            line++;
    }
    return false;
}
