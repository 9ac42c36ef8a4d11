/* Reading and writing cgroup control files. They are small and the kernel
 * applies a write as one unit, so one read or one write is the whole job. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup/internal.h"
#include "common/cleanup.h"
#include "common/fileio.h"

int cg_write_fd(int fd, const char *value)
{
    assert(value);
    size_t len = strlen(value);
    ssize_t n;
    do {
        n = pwrite(fd, value, len, 0);
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    return (size_t)n == len ? 0 : -EIO;
}

int cg_write_file_at(int dirfd, const char *name, const char *value)
{
    assert(name);
    _cleanup_close_ int fd = openat(dirfd, name, O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -errno;
    return cg_write_fd(fd, value);
}

int cg_read_file_at(int dirfd, const char *name, char *buf, size_t size)
{
    assert(name);
    assert(buf);
    assert(size > 0);
    _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -errno;
    ssize_t len = act_read_full(fd, buf, size - 1);
    if (len < 0)
        return (int)len;
    buf[len] = '\0';
    return 0;
}

bool cg_parse_keyed(const char *text, const char *key, uint64_t *value)
{
    assert(key);
    assert(value);
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

int cg_read_pids(int dirfd, pid_t **pids, size_t *n)
{
    assert(pids);
    assert(n);
    char buf[65536];
    int r = cg_read_file_at(dirfd, "cgroup.procs", buf, sizeof(buf));
    if (r < 0)
        return r;
    size_t count = 0, cap = 16;
    pid_t *list = malloc(cap * sizeof(*list));
    if (!list)
        return -ENOMEM;
    for (char *p = buf; *p;) {
        char *end = NULL;
        long pid = strtol(p, &end, 10);
        if (end == p)
            break;
        p = end + strspn(end, "\n");
        if (count == cap) {
            pid_t *bigger = realloc(list, 2 * cap * sizeof(*list));
            if (!bigger) {
                free(list);
                return -ENOMEM;
            }
            list = bigger;
            cap *= 2;
        }
        list[count++] = (pid_t)pid;
    }
    *pids = list;
    *n = count;
    return 0;
}
