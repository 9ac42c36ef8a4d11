/* Where the cgroup hierarchies are mounted and where this process sits in
 * them, read from /proc rather than assumed: production hosts mount cgroup2
 * at /sys/fs/cgroup, hybrid hosts at /sys/fs/cgroup/unified. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgroup/internal.h"
#include "common/cleanup.h"

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape_octal(char *s)
{
    char *out = s;
    for (char *in = s; *in; in++) {
        if (in[0] == '\\' && in[1] >= '0' && in[1] <= '7' && in[2] >= '0' && in[2] <= '7' &&
            in[3] >= '0' && in[3] <= '7') {
            *out++ = (char)((in[1] - '0') * 64 + (in[2] - '0') * 8 + (in[3] - '0'));
            in += 3;
        } else {
            *out++ = *in;
        }
    }
    *out = '\0';
}

static bool option_listed(const char *options, const char *wanted)
{
    size_t len = strlen(wanted);
    for (const char *p = options; p && *p;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n == len && strncmp(p, wanted, len) == 0)
            return true;
        p = comma ? comma + 1 : NULL;
    }
    return false;
}

/* Finds the first mount with fstype and, for v1, the controller among its
 * super options. Only mounts of the hierarchy's root ("/") count: a bind
 * mount of a subtree would shift every path we compute. A v1 hierarchy
 * mounted read-only (as a container on a hybrid host sees them) is one we
 * cannot create groups in, so it does not count either. */
static int find_mount(const char *fstype, const char *controller, char **out)
{
    _cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -errno;
    _cleanup_free_ char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        line[strcspn(line, "\n")] = '\0';
        char *sep = strstr(line, " - ");
        if (!sep)
            continue;
        *sep = '\0';
        char *tail = sep + 3;
        char *saveptr = NULL;
        char *type = strtok_r(tail, " ", &saveptr);
        char *source = strtok_r(NULL, " ", &saveptr);
        char *super = strtok_r(NULL, " ", &saveptr);
        if (!type || !source || strcmp(type, fstype) != 0)
            continue;
        if (controller && !option_listed(super, controller))
            continue;
        char *fields[6] = {0};
        saveptr = NULL;
        char *p = strtok_r(line, " ", &saveptr);
        for (int i = 0; i < 6 && p; i++, p = strtok_r(NULL, " ", &saveptr))
            fields[i] = p;
        if (!fields[3] || !fields[4] || strcmp(fields[3], "/") != 0)
            continue;
        if (controller && option_listed(fields[5], "ro"))
            continue;
        unescape_octal(fields[4]);
        *out = strdup(fields[4]);
        return *out ? 0 : -ENOMEM;
    }
    return -ENOENT;
}

int cg_find_v2_mount(char **out, act_error *err)
{
    assert(out);
    int r = find_mount("cgroup2", NULL, out);
    if (r == -ENOENT)
        return act_error_set(err, ENOENT,
                             "no cgroup2 file system in /proc/self/mountinfo; mount it (systemd "
                             "does so at /sys/fs/cgroup or /sys/fs/cgroup/unified)");
    if (r < 0)
        return act_error_set(err, -r, "cannot read /proc/self/mountinfo: %s", strerror(-r));
    return 0;
}

int cg_find_v1_mount(const char *controller, char **out, act_error *err)
{
    assert(controller);
    assert(out);
    int r = find_mount("cgroup", controller, out);
    if (r < 0 && r != -ENOENT)
        return act_error_set(err, -r, "cannot read /proc/self/mountinfo: %s", strerror(-r));
    return r;
}

int cg_own_v2_cgroup(char **out, act_error *err)
{
    assert(out);
    _cleanup_fclose_ FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return act_error_set(err, errno, "cannot read /proc/self/cgroup: %s", strerror(errno));
    _cleanup_free_ char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        line[strcspn(line, "\n")] = '\0';
        /* The v2 entry is the one with hierarchy id 0 and no controllers. */
        if (strncmp(line, "0::", 3) == 0) {
            *out = strdup(line + 3);
            return *out ? 0 : act_error_set(err, ENOMEM, "out of memory");
        }
    }
    return act_error_set(err, ENOENT,
                         "/proc/self/cgroup has no cgroup2 entry (\"0::\"); this process is not "
                         "on a cgroup2 hierarchy");
}
