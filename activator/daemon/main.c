/* activatord's command line. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activator/config/config.h"
#include "activator/daemon/daemon_main.h"
#include "common/cleanup.h"
#include "common/log.h"

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: activatord [--config PATH] [--check-config] [--verbose]\n"
            "\n"
            "Runs the host activator of this box (normally as activatord.service).\n"
            "\n"
            "  --config PATH    daemon configuration (default %s)\n"
            "  --check-config   validate the configuration and every host file, print each\n"
            "                   problem as FILE:LINE: KEY: what is wrong, and exit\n"
            "  --verbose        log every pipeline step\n"
            "  --version        print the version and exit\n"
            "  --help           show this help\n",
            CFG_DAEMON_DEFAULT_PATH);
}

/* What the host files and the daemon file name must exist on this box too:
 * each missing user or group is printed; returns how many. */
static size_t check_accounts(const char *config_path, const cfg_daemon *config,
                             const cfg_host *hosts, size_t n)
{
    size_t problems = 0;
    for (size_t i = 0; i < n; i++) {
        uid_t uid;
        gid_t gid;
        bool have;
        act_error err = {0};
        if (cfg_host_credentials(&hosts[i], &uid, &gid, &have, &err) < 0) {
            fprintf(stderr, "%s/%s.conf: %s\n", config->hosts_directory, hosts[i].name,
                    err.message);
            problems++;
        }
    }
    gid_t control_gid, viewer_gid;
    act_error err = {0};
    if (cfg_resolve_control_groups(config, &control_gid, &viewer_gid, &err) < 0) {
        fprintf(stderr, "%s: %s\n", config_path, err.message);
        problems++;
    }
    return problems;
}

int ad_check_config(const char *config_path)
{
    _cleanup_(cfg_errors_free) cfg_errors errors = {0};
    _cleanup_(cfg_daemon_free) cfg_daemon config = {0};
    size_t problems = 0;
    if (cfg_load_daemon(config_path, &config, &errors) == 0) {
        cfg_host *hosts = NULL;
        size_t n = 0;
        cfg_load_hosts(config.hosts_directory, &hosts, &n, &errors);
        problems += check_accounts(config_path, &config, hosts, n);
        if (!errors.n && !problems)
            printf("%s: ok (%zu hosts in %s)\n", config_path, n, config.hosts_directory);
        cfg_hosts_free(hosts, n);
    }
    problems += cfg_errors_print(&errors, stderr);
    return problems ? 1 : 0;
}

int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"config", required_argument, NULL, 'c'},
        {"check-config", no_argument, NULL, 'C'},
        {"verbose", no_argument, NULL, 'v'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    const char *config_path = CFG_DAEMON_DEFAULT_PATH;
    bool check = false;
    int option;
    while ((option = getopt_long(argc, argv, "c:hv", options, NULL)) != -1) {
        switch (option) {
        case 'c':
            config_path = optarg;
            break;
        case 'C':
            check = true;
            break;
        case 'v':
            act_log_set_max_priority(LOG_DEBUG);
            break;
        case 'V':
            printf("activatord %s\n", ACTIVATOR_VERSION);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "activatord: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    return check ? ad_check_config(config_path) : ad_run(config_path);
}
