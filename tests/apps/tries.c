#include "tries.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static void report(FILE *out, const char *action, int error, const char *detail)
{
    if (error == 0)
        fprintf(out, "try %s: ok%s%s\n", action, detail ? " " : "", detail ? detail : "");
    else
        fprintf(out, "try %s: %s (%s)\n", action, strerrorname_np(error) ? strerrorname_np(error)
                                                                        : "E?",
                strerror(error));
    fflush(out);
}

static int write_text(const char *path, const char *text, int flags)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC | flags, 0644);
    if (fd < 0)
        return errno;
    ssize_t n = write(fd, text, strlen(text));
    int e = n < 0 ? errno : 0;
    close(fd);
    return e;
}

static int count_entries(const char *dir, char *detail, size_t size)
{
    DIR *d = opendir(dir);
    if (!d)
        return errno;
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    snprintf(detail, size, "%zu entries", n);
    return 0;
}

/* Opens the first block device found in dir (a disk, had it been a box's
 * /dev) for reading, and closes it: ENOENT when dir holds none. */
static int open_block_device(const char *dir, char *detail, size_t size)
{
    DIR *d = opendir(dir);
    if (!d)
        return errno;
    int e = ENOENT;
    for (struct dirent *entry; e == ENOENT && (entry = readdir(d));) {
        struct stat st;
        if (fstatat(dirfd(d), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISBLK(st.st_mode))
            continue;
        int fd = openat(dirfd(d), entry->d_name, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        e = fd < 0 ? errno : 0;
        if (fd >= 0)
            close(fd);
        snprintf(detail, size, "%s", entry->d_name);
    }
    closedir(d);
    return e;
}

static int connect_unix(const char *path)
{
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(address.sun_path))
        return ENAMETOOLONG;
    strcpy(address.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno;
    int e = connect(fd, (struct sockaddr *)&address, sizeof(address)) < 0 ? errno : 0;
    close(fd);
    return e;
}

/* The pids /proc shows us, as " p1 p2 ..." after the count. */
static int visible_pids(char *detail, size_t size)
{
    DIR *d = opendir("/proc");
    if (!d)
        return errno;
    size_t n = 0, used = 0;
    char list[4000] = "";
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[strspn(e->d_name, "0123456789")] != '\0')
            continue;
        n++;
        if (used + strlen(e->d_name) + 2 < sizeof(list))
            used += (size_t)snprintf(list + used, sizeof(list) - used, " %s", e->d_name);
    }
    closedir(d);
    snprintf(detail, size, "%zu pids:%s", n, list);
    return 0;
}

static int own_cgroup(char *detail, size_t size)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return errno;
    char line[4096];
    int e = ENOENT;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, "0::", 3) == 0) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(detail, size, "%s", line + 3);
            e = 0;
        }
    fclose(f);
    return e;
}

static void run_one(const char *action, FILE *out)
{
    const char *colon = strchr(action, ':');
    if (!colon) {
        report(out, action, EINVAL, NULL);
        return;
    }
    size_t verb = (size_t)(colon - action);
    const char *arg = colon + 1;
    char detail[4200] = "", path[4200];
    int e = EINVAL;
    if (strncmp(action, "write", verb) == 0 && verb == 5) {
        e = write_text(arg, "x", O_CREAT | O_TRUNC);
    } else if (strncmp(action, "read", verb) == 0 && verb == 4) {
        int fd = open(arg, O_RDONLY | O_CLOEXEC);
        e = fd < 0 ? errno : 0;
        if (fd >= 0)
            close(fd);
    } else if (strncmp(action, "openw", verb) == 0 && verb == 5) {
        /* Opened for writing, never written: whether a write would be let
         * through, without making one (a kernel setting, the SysRq key). */
        int fd = open(arg, O_WRONLY | O_CLOEXEC);
        e = fd < 0 ? errno : 0;
        if (fd >= 0)
            close(fd);
    } else if (strncmp(action, "blockdev", verb) == 0 && verb == 8) {
        e = open_block_device(arg, detail, sizeof(detail));
    } else if (strncmp(action, "list", verb) == 0 && verb == 4) {
        e = count_entries(arg, detail, sizeof(detail));
    } else if (strncmp(action, "proc", verb) == 0 && verb == 4) {
        struct stat st;
        snprintf(path, sizeof(path), "/proc/%s", arg);
        e = stat(path, &st) < 0 ? errno : 0;
    } else if (strncmp(action, "cgjoin", verb) == 0 && verb == 6) {
        char pid[32];
        snprintf(pid, sizeof(pid), "%d", (int)getpid());
        snprintf(path, sizeof(path), "%s/cgroup.procs", arg);
        e = write_text(path, pid, 0);
    } else if (strncmp(action, "cgwrite", verb) == 0 && verb == 7) {
        const char *eq = strrchr(arg, '=');
        if (eq) {
            snprintf(path, sizeof(path), "%.*s", (int)(eq - arg), arg);
            e = write_text(path, eq + 1, 0);
        }
    } else if (strncmp(action, "connect", verb) == 0 && verb == 7) {
        e = connect_unix(arg);
    } else if (strncmp(action, "pids", verb) == 0 && verb == 4) {
        e = visible_pids(detail, sizeof(detail));
    } else if (strncmp(action, "cgroup", verb) == 0 && verb == 6) {
        e = own_cgroup(detail, sizeof(detail));
    }
    report(out, action, e, detail[0] ? detail : NULL);
}

void act_tries_run(char *const *actions, size_t n, FILE *out)
{
    for (size_t i = 0; i < n; i++)
        run_one(actions[i], out);
    fprintf(out, "tries done\n");
    fflush(out);
}
