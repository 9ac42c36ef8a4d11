/* The hosts directory: every <host>.conf, loaded independently. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "activator/config/config-internal.h"
#include "activator/config/config.h"
#include "common/cleanup.h"
#include "common/fileio.h"

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int compare_hosts(const void *a, const void *b)
{
    return strcmp(((const cfg_host *)a)->name, ((const cfg_host *)b)->name);
}

static void names_free(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* The "*.conf" entries of dir_fd, sorted, so loads and reports are in the
 * same order on every machine. Dot entries are listed too (".x.conf"), so
 * that a hidden host file is reported rather than silently ignored. */
static int list_conf_files(int dir_fd, char ***out, size_t *n_out)
{
    _cleanup_(closedirp) DIR *dir = act_opendir_at(dir_fd, ".");
    if (!dir)
        return -errno;
    char **names = NULL;
    size_t n = 0, cap = 0;
    int r = 0;
    struct dirent *entry;
    errno = 0;
    while ((entry = readdir(dir))) {
        size_t len = strlen(entry->d_name);
        if (len < 5 || strcmp(entry->d_name + len - 5, ".conf") != 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **grown = realloc(names, cap * sizeof(char *));
            if (!grown) {
                r = -ENOMEM;
                break;
            }
            names = grown;
        }
        if (!(names[n] = strdup(entry->d_name))) {
            r = -ENOMEM;
            break;
        }
        n++;
        errno = 0;
    }
    if (r == 0 && errno)
        r = -errno;
    if (r < 0) {
        names_free(names, n);
        return r;
    }
    qsort(names, n, sizeof(char *), compare_names);
    *out = names;
    *n_out = n;
    return 0;
}

typedef struct listen_owner {
    const lsn_address *address;
    size_t host;
    unsigned line;
} listen_owner;

static int compare_owners(const void *a, const void *b)
{
    const listen_owner *x = a, *y = b;
    if (x->address->len != y->address->len)
        return x->address->len < y->address->len ? -1 : 1;
    int c = memcmp(&x->address->addr, &y->address->addr, x->address->len);
    if (c)
        return c;
    return x->host < y->host ? -1 : x->host > y->host;
}

/* Two hosts cannot bind one address; sorting all addresses finds every clash
 * in n log n even with 10,000 hosts. The later host (in name order) loses. */
static int refuse_shared_addresses(const char *dir, cfg_host *hosts, size_t n, bool *refused,
                                   cfg_errors *errors)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += hosts[i].n_listen;
    if (total < 2)
        return 0;
    _cleanup_free_ listen_owner *owners = malloc(total * sizeof(*owners));
    if (!owners)
        return -ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < hosts[i].n_listen; j++)
            owners[k++] = (listen_owner){&hosts[i].listen[j], i, hosts[i].listen_lines[j]};
    qsort(owners, total, sizeof(*owners), compare_owners);
    size_t first = 0;
    for (size_t i = 1; i < total; i++) {
        if (!lsn_address_equal(owners[i].address, owners[first].address)) {
            first = i;
            continue;
        }
        size_t loser = owners[i].host;
        if (refused[loser] || loser == owners[first].host)
            continue;
        refused[loser] = true;
        char shown[128];
        lsn_format(owners[i].address, shown, sizeof(shown));
        char path[512];
        snprintf(path, sizeof(path), "%s/%s.conf", dir, hosts[loser].name);
        cfg_errors_add(errors, path, owners[i].line, "ListenStream",
                       "%s is also a socket of host %s (give each host its own address)", shown,
                       hosts[owners[first].host].name);
    }
    return 0;
}

int cfg_open_hosts_dir(const char *dir, cfg_errors *errors)
{
    int dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0) {
        int saved = errno;
        cfg_errors_add(errors, dir, 0, NULL,
                       "cannot open the hosts directory: %s (create it or set "
                       "HostsDirectory=)",
                       strerror(saved));
        return -saved;
    }
    return dir_fd;
}

int cfg_load_host_file(const char *dir, const char *file_name, cfg_host *host, cfg_errors *errors)
{
    *host = (cfg_host){0};
    /* The name is checked before the directory is even opened: a refused
     * name touches nothing. */
    _cleanup_free_ char *name = NULL;
    int r = cfg_host_name_from_file(dir, file_name, &name, errors);
    if (r < 0)
        return r;
    _cleanup_close_ int dir_fd = cfg_open_hosts_dir(dir, errors);
    if (dir_fd < 0)
        return dir_fd;
    return cfg_load_host_at(dir_fd, dir, file_name, host, errors);
}

int cfg_load_hosts(const char *dir, cfg_host **hosts_out, size_t *n_out, cfg_errors *errors)
{
    *hosts_out = NULL;
    *n_out = 0;
    _cleanup_close_ int dir_fd = cfg_open_hosts_dir(dir, errors);
    if (dir_fd < 0)
        return dir_fd;
    char **names = NULL;
    size_t n_names = 0;
    int r = list_conf_files(dir_fd, &names, &n_names);
    if (r < 0) {
        cfg_errors_add(errors, dir, 0, NULL, "cannot list the hosts directory: %s", strerror(-r));
        return r;
    }
    cfg_host *hosts = calloc(n_names ? n_names : 1, sizeof(*hosts));
    if (!hosts) {
        names_free(names, n_names);
        return -ENOMEM;
    }
    size_t n = 0;
    for (size_t i = 0; i < n_names; i++) {
        if (cfg_load_host_at(dir_fd, dir, names[i], &hosts[n], errors) == 0)
            n++;
    }
    names_free(names, n_names);

    _cleanup_free_ bool *refused = calloc(n ? n : 1, sizeof(bool));
    if (!refused || refuse_shared_addresses(dir, hosts, n, refused, errors) < 0) {
        cfg_hosts_free(hosts, n);
        return -ENOMEM;
    }
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (refused[i])
            cfg_host_free(&hosts[i]);
        else
            hosts[kept++] = hosts[i];
    }
    /* Files sort by file name ("a-b.conf" before "a.conf"), hosts by host
     * name ("a" before "a-b"): what the daemon looks hosts up by. */
    qsort(hosts, kept, sizeof(*hosts), compare_hosts);
    /* Give back the slots of skipped files. */
    cfg_host *shrunk = realloc(hosts, (kept ? kept : 1) * sizeof(*hosts));
    *hosts_out = shrunk ? shrunk : hosts;
    *n_out = kept;
    return 0;
}
