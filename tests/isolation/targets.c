/* The attack's targets (targets.h). */
#include "targets.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct query {
    char *text;
    size_t size;
    size_t len;
    bool overflow;
} query;

/* Appends &key=value, the value percent-encoded. */
static void add(query *q, const char *key, const char *value)
{
    char encoded[PATH_MAX * 6];
    size_t n = 0;
    for (const unsigned char *c = (const unsigned char *)value; *c && n + 4 < sizeof(encoded); c++) {
        if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
            strchr("/._-@", *c))
            encoded[n++] = (char)*c;
        else
            n += (size_t)snprintf(encoded + n, 4, "%%%02X", *c);
    }
    encoded[n] = '\0';
    int r = snprintf(q->text + q->len, q->size - q->len, "%s%s=%s", q->len ? "&" : "", key, encoded);
    if (r < 0 || (size_t)r >= q->size - q->len)
        q->overflow = true;
    else
        q->len += (size_t)r;
}

static void addf(query *q, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void addf(query *q, const char *key, const char *fmt, ...)
{
    char value[PATH_MAX * 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(value, sizeof(value), fmt, ap);
    va_end(ap);
    add(q, key, value);
}

static bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* Every version of host's releases: the directories to create files in and
 * the files (builds, manifests) to open for writing. */
static void add_releases(query *q, const char *state_dir, const char *host)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/releases/%s", state_dir, host);
    add(q, "create-in", dir);
    DIR *versions = opendir(dir);
    if (!versions)
        return;
    struct dirent *version;
    while ((version = readdir(versions))) {
        if (version->d_name[0] == '.' || version->d_type != DT_DIR)
            continue;
        char version_dir[PATH_MAX + 256];
        snprintf(version_dir, sizeof(version_dir), "%s/%s", dir, version->d_name);
        add(q, "create-in", version_dir);
        DIR *files = opendir(version_dir);
        if (!files)
            continue;
        struct dirent *file;
        while ((file = readdir(files)))
            if (file->d_type == DT_REG)
                addf(q, "write", "%s/%s", version_dir, file->d_name);
        closedir(files);
    }
    closedir(versions);
}

/* The other host's notify sockets: <runtime>/notify/<host>/... or the older
 * <runtime>/notify/<host>.<N>. */
static void add_notify(query *q, const char *runtime_dir, const char *host)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/notify", runtime_dir);
    DIR *notify = opendir(dir);
    if (!notify)
        return;
    size_t n = strlen(host);
    struct dirent *entry;
    while ((entry = readdir(notify))) {
        char path[PATH_MAX + 256];
        snprintf(path, sizeof(path), "%s/%s", dir, entry->d_name);
        if (strncmp(entry->d_name, host, n) == 0 && entry->d_name[n] == '.') {
            add(q, "notify", path);
        } else if (strcmp(entry->d_name, host) == 0 && entry->d_type == DT_DIR) {
            DIR *sockets = opendir(path);
            struct dirent *s;
            while (sockets && (s = readdir(sockets)))
                if (s->d_type == DT_SOCK)
                    addf(q, "notify", "%s/%s", path, s->d_name);
            if (sockets)
                closedir(sockets);
        }
    }
    closedir(notify);
}

/* Where each cgroup hierarchy is mounted, as /proc/self/mountinfo says:
 * "" for the cgroup2 one, or a v1 controller name. */
static bool mount_of(const char *controller, char *out, size_t size)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return false;
    char line[8192];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f)) {
        char mountpoint[PATH_MAX];
        char *dash = strstr(line, " - ");
        char type[64], super[4096];
        if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", mountpoint) != 1 ||
            sscanf(dash + 3, "%63s %*s %4095s", type, super) != 2)
            continue;
        if (!*controller) {
            found = strcmp(type, "cgroup2") == 0;
        } else if (strcmp(type, "cgroup") == 0) {
            for (char *save = NULL, *o = strtok_r(super, ",", &save); o && !found;
                 o = strtok_r(NULL, ",", &save))
                found = strcmp(o, controller) == 0;
        }
        if (found)
            snprintf(out, size, "%s", mountpoint);
    }
    fclose(f);
    return found;
}

/* pid's cgroups: in cgroup2 its leaf and the three directories above it
 * (the host's, hosts/, the daemon's root); in each v1 hierarchy mounted
 * here, its directory. */
static void add_cgroups_of(query *q, pid_t pid, int v2_levels)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    char line[4096];
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        char *controllers = strchr(line, ':');
        char *relative = controllers ? strchr(controllers + 1, ':') : NULL;
        if (!relative)
            continue;
        *controllers++ = '\0';
        *relative++ = '\0';
        char first[256];
        snprintf(first, sizeof(first), "%s", controllers);
        first[strcspn(first, ",")] = '\0';
        char mountpoint[PATH_MAX];
        if (!mount_of(first, mountpoint, sizeof(mountpoint)))
            continue;
        char dir[PATH_MAX * 2];
        snprintf(dir, sizeof(dir), "%s%s", mountpoint, strcmp(relative, "/") ? relative : "");
        int levels = *first ? 1 : v2_levels;
        for (int i = 0; i < levels && strlen(dir) > strlen(mountpoint); i++) {
            add(q, "cgroup", dir);
            *strrchr(dir, '/') = '\0';
        }
    }
    fclose(f);
}

pid_t targets_parent_of(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    pid_t parent = 0;
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "PPid:", 5) == 0)
            parent = (pid_t)atoi(line + 5);
    if (f)
        fclose(f);
    return parent;
}

static int plant_secret(const hostile_setup *s, char *path, size_t size, char *why,
                        size_t why_size)
{
    char dir[PATH_MAX - 32];
    snprintf(dir, sizeof(dir), "%s/hosts/%s/state", s->state_dir, s->ordinary_host);
    struct stat st;
    if (stat(dir, &st) < 0) {
        snprintf(why, why_size, "the ordinary host's state directory %s: %s", dir,
                 strerror(errno));
        return -errno;
    }
    snprintf(path, size, "%s/hostile-secret", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, "the other tenant's secret\n", 26) != 26) {
        snprintf(why, why_size, "cannot write %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -EIO;
    }
    /* As the other host's own file would be: its user's, readable by all. */
    (void)!fchown(fd, st.st_uid, st.st_gid);
    fchmod(fd, 0644);
    close(fd);
    return 0;
}

/* A file any user of the box may read, in the daemon's runtime directory,
 * which a host's view hides: only the view keeps a tenant from it, so it
 * is the target that shows whether a helper's root leads out of the view
 * (the other host's secret sits behind a directory of its user's, which
 * the box's own modes already close). */
static void plant_canary(const hostile_setup *s, char *path, size_t size)
{
    snprintf(path, size, "%s/act-hostile-canary", s->runtime_dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        path[0] = '\0';
        return;
    }
    (void)!write(fd, "the box's file\n", 15);
    fchmod(fd, 0644);
    close(fd);
}

int targets_build(const hostile_setup *s, pid_t other_pid, char *out, size_t size, char *why,
                  size_t why_size)
{
    char secret[PATH_MAX];
    int r = plant_secret(s, secret, sizeof(secret), why, why_size);
    if (r < 0)
        return r;
    int n = snprintf(out, size, "/attack?");
    query q = {.text = out + n, .size = size - (size_t)n};
    addf(&q, "other-pid", "%d", (int)other_pid);

    char path[PATH_MAX];
    add(&q, "read", secret);
    plant_canary(s, path, sizeof(path));
    if (path[0])
        add(&q, "read", path);
    snprintf(path, sizeof(path), "%s/claims/%s.claim", s->state_dir, s->ordinary_host);
    if (exists(path))
        add(&q, "read", path);
    snprintf(path, sizeof(path), "%s/hosts/%s/build-state.json", s->state_dir, s->ordinary_host);
    if (exists(path))
        add(&q, "read", path);
    snprintf(path, sizeof(path), "%s/hosts/%s/state", s->state_dir, s->ordinary_host);
    add(&q, "list", path);
    add(&q, "create-in", path);
    snprintf(path, sizeof(path), "%s/claims", s->state_dir);
    if (exists(path)) {
        add(&q, "list", path);
        add(&q, "create-in", path);
    }
    snprintf(path, sizeof(path), "%s/hosts", s->state_dir);
    add(&q, "create-in", path);
    add(&q, "create-in", s->runtime_dir);

    snprintf(path, sizeof(path), "%s/releases", s->state_dir);
    add(&q, "create-in", path);
    add_releases(&q, s->state_dir, s->hostile_host);
    add_releases(&q, s->state_dir, s->ordinary_host);

    const char *urls[] = {s->control_url, s->events_url};
    for (size_t i = 0; i < 2; i++)
        if (urls[i] && strncmp(urls[i], "ipc://", 6) == 0)
            add(&q, "connect", urls[i] + 6);
    add_notify(&q, s->runtime_dir, s->ordinary_host);

    add_cgroups_of(&q, other_pid, 4);
    pid_t daemon_pid = targets_parent_of(other_pid);
    if (daemon_pid > 1)
        add_cgroups_of(&q, daemon_pid, 1);

    if (q.overflow) {
        snprintf(why, why_size, "the attack's targets do not fit in %zu bytes", size);
        return -E2BIG;
    }
    return 0;
}
