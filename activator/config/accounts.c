/* The accounts the files name, looked up on this box after parsing: a user
 * may be created after the file is written, so a file that parses can
 * still name one this box does not have. */
#include <stdio.h>
#include <string.h>

#include "activator/config/config.h"
#include "activator/config/parse/account.h"

/* The resolvers' sentences begin "KEY=VALUE: "; the line reported names the
 * key already. */
static const char *without_key(const char *message, const char *key)
{
    size_t len = strlen(key);
    return strncmp(message, key, len) == 0 && message[len] == '=' ? message + len + 1 : message;
}

/* User= and Group= of one host file; how many are missing. */
static size_t check_host(const char *path, const cfg_host *host, cfg_errors *errors)
{
    if (!host->user)
        return 0;
    uid_t uid;
    gid_t gid;
    act_error err = {0};
    if (cfg_resolve_user("User", host->user, &uid, &gid, &err) < 0) {
        cfg_errors_add(errors, path, host->lines.user, "User", "%s",
                       without_key(err.message, "User"));
        return 1;
    }
    if (host->group && cfg_resolve_group("Group", host->group, &gid, &err) < 0) {
        cfg_errors_add(errors, path, host->lines.group, "Group", "%s",
                       without_key(err.message, "Group"));
        return 1;
    }
    if (uid == 0 && host->ambient_capabilities) {
        cfg_errors_add(errors, path, host->lines.ambient_capabilities, "AmbientCapabilities",
                       "set with User=%s: " CFG_ROOT_CAPABILITIES_REFUSED, host->user);
        return 1;
    }
    return 0;
}

size_t cfg_check_accounts(const char *config_path, const cfg_daemon *config,
                          const cfg_host *hosts, size_t n, cfg_errors *errors)
{
    size_t problems = 0;
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s.conf", config->hosts_directory, hosts[i].name);
        problems += check_host(path, &hosts[i], errors);
    }
    gid_t control_gid = 0, viewer_gid = 0;
    act_error err = {0};
    if (cfg_resolve_control_groups(config, &control_gid, &viewer_gid, &err) < 0) {
        /* The message starts with the key it is about. */
        const char *key = strncmp(err.message, "ViewerGroup", 11) == 0 ? "ViewerGroup"
                                                                       : "ControlGroup";
        cfg_errors_add(errors, config_path, cfg_daemon_key_line(config, key), key, "%s",
                       without_key(err.message, key));
        problems++;
    }
    return problems;
}

size_t cfg_check_root_hosts(const cfg_daemon *config, const cfg_host *hosts, size_t n,
                            cfg_errors *warnings)
{
    size_t found = 0;
    for (size_t i = 0; i < n; i++) {
        uid_t uid;
        gid_t gid;
        act_error err = {0};
        if (!hosts[i].user || cfg_resolve_user("User", hosts[i].user, &uid, &gid, &err) < 0 ||
            uid != 0)
            continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s.conf", config->hosts_directory, hosts[i].name);
        cfg_errors_add(warnings, path, hosts[i].lines.user, "User",
                       "warning: %s is root: the host's code runs as root only in a user "
                       "namespace of its own, as its dynamic user on the box, without "
                       "capabilities: the box's root-owned files are not its own; remove "
                       "User= if it needs no uid 0",
                       hosts[i].user);
        found++;
    }
    return found;
}
