/* Where a host's filesystem view comes from: the daemon's directories,
 * which no host sees, and the host's own, which it writes. Plain string
 * work on the two files' values; cgroup/ makes the view from it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activator/config/config.h"
#include "common/cleanup.h"
#include "common/strv.h"

void cfg_view_paths_clear(cfg_view_paths *paths)
{
    act_strv_free(paths->hidden);
    act_strv_free(paths->writable);
    act_strv_free(paths->writable_if_present);
    *paths = (cfg_view_paths){0};
}

/* Appends a copy of text (n bytes of it) to *list; false when out of memory. */
static bool append(char ***list, const char *text, size_t n)
{
    size_t len = act_strv_length(*list);
    char **grown = realloc(*list, (len + 2) * sizeof(char *));
    if (!grown)
        return false;
    *list = grown;
    grown[len] = strndup(text, n);
    grown[len + 1] = NULL;
    return grown[len] != NULL;
}

/* True when path is dir or lies beneath it; trailing slashes do not count. */
static bool within(const char *path, const char *dir)
{
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/')
        len--;
    return strncmp(path, dir, len) == 0 && (path[len] == '\0' || path[len] == '/');
}

/* The directories of the daemon no host sees, with the sentence that names
 * each in a refusal. */
typedef struct daemon_dir {
    const char *path;
    size_t len;
    const char *what;
} daemon_dir;

static size_t daemon_dirs(const cfg_daemon *daemon, daemon_dir dirs[4])
{
    size_t n = 0;
    dirs[n++] = (daemon_dir){daemon->state_directory, strlen(daemon->state_directory),
                             "the daemon's state directory (the releases, every host's state)"};
    dirs[n++] = (daemon_dir){daemon->runtime_directory, strlen(daemon->runtime_directory),
                             "the daemon's runtime directory (its control and notify sockets)"};
    dirs[n++] = (daemon_dir){daemon->hosts_directory, strlen(daemon->hosts_directory),
                             "the hosts directory (every host's file)"};
    /* A dir:// store may keep the claims anywhere. */
    if (daemon->store && strncmp(daemon->store, "dir://", 6) == 0)
        dirs[n++] = (daemon_dir){daemon->store + 6, strcspn(daemon->store + 6, "?#"),
                                 "the claims directory (Store=)"};
    return n;
}

/* Root without a capability still passes every permission check of a
 * root-owned socket: systemd's private bus, the system bus, a container
 * engine's socket, all in /run, would take its orders. So a host that runs
 * as root sees a /run of its own, empty but for what a host uses there:
 * the journal's sockets and a systemd-resolved resolv.conf (its notify
 * socket's directory is passed at each spawn). A socket it must reach is
 * named in ReadWritePaths=. */
static const char *const root_run_kept[] = {"/run/systemd/journal", "/run/systemd/resolve"};

int cfg_host_view_paths(const cfg_daemon *daemon, const cfg_host *config, bool as_root,
                        cfg_view_paths *out, act_error *err)
{
    *out = (cfg_view_paths){0};
    _cleanup_(cfg_view_paths_clear) cfg_view_paths paths = {0};
    daemon_dir dirs[4];
    size_t n_dirs = daemon_dirs(daemon, dirs);
    bool ok = true;
    for (size_t i = 0; i < n_dirs; i++)
        ok = ok && append(&paths.hidden, dirs[i].path, dirs[i].len);
    if (as_root) {
        ok = ok && append(&paths.hidden, "/run", 4);
        for (size_t i = 0; i < sizeof(root_run_kept) / sizeof(root_run_kept[0]); i++)
            ok = ok &&
                 append(&paths.writable_if_present, root_run_kept[i], strlen(root_run_kept[i]));
    }
    char state[4096];
    int len = snprintf(state, sizeof(state), "%s/hosts/%s/state", daemon->state_directory,
                       config->name);
    ok = ok && len < (int)sizeof(state) && append(&paths.writable, state, (size_t)len);
    for (char **p = config->read_write_paths; ok && p && *p; p++) {
        const char *path = (*p)[0] == '-' ? *p + 1 : *p;
        for (size_t i = 0; i < n_dirs; i++) {
            char dir[4096];
            snprintf(dir, sizeof(dir), "%.*s", (int)dirs[i].len, dirs[i].path);
            if (within(path, dir))
                return act_error_set(err, EACCES,
                                     "ReadWritePaths=%s is inside %s, %s, which no host "
                                     "sees (its own state directory is writable already; "
                                     "name a path outside it)",
                                     path, dir, dirs[i].what);
        }
        ok = append((*p)[0] == '-' ? &paths.writable_if_present : &paths.writable, path,
                    strlen(path));
    }
    if (!ok)
        return act_error_set(err, ENOMEM, "out of memory");
    *out = TAKE_STRUCT(paths);
    return 0;
}

size_t cfg_check_view_paths(const cfg_daemon *config, const cfg_host *hosts, size_t n,
                            cfg_errors *errors)
{
    size_t problems = 0;
    for (size_t i = 0; i < n; i++) {
        if (hosts[i].filesystem_box || !hosts[i].read_write_paths)
            continue;
        cfg_view_paths paths;
        act_error err = {0};
        if (cfg_host_view_paths(config, &hosts[i], false, &paths, &err) < 0) {
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s.conf", config->hosts_directory, hosts[i].name);
            /* The line reported names the key already. */
            const char *text = strncmp(err.message, "ReadWritePaths=", 15) == 0
                                   ? err.message + 15
                                   : err.message;
            cfg_errors_add(errors, path, hosts[i].lines.read_write_paths, "ReadWritePaths", "%s",
                           text);
            problems++;
            continue;
        }
        cfg_view_paths_clear(&paths);
    }
    return problems;
}
