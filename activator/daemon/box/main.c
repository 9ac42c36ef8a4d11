/* activatord's command line. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activator/config/config.h"
#include "activator/daemon/accounts/userdb.h"
#include "activator/daemon/box/daemon_main.h"
#include "activator/log_keeper/log_keeper.h"
#include "activator/log_keeper/protocol.h"
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

int ad_check_config(const char *config_path)
{
    _cleanup_(cfg_errors_free) cfg_errors errors = {0};
    _cleanup_(cfg_daemon_free) cfg_daemon config = {0};
    if (cfg_load_daemon(config_path, &config, &errors) == 0) {
        cfg_host *hosts = NULL;
        size_t n = 0;
        cfg_load_hosts(config.hosts_directory, &hosts, &n, &errors);
        cfg_check_accounts(config_path, &config, hosts, n, &errors);
        /* Warnings do not fail the check: running a host as root is the
         * operator's explicit choice. */
        _cleanup_(cfg_errors_free) cfg_errors warnings = {0};
        cfg_check_root_hosts(&config, hosts, n, &warnings);
        cfg_errors_print(&warnings, stderr);
        cfg_check_view_paths(&config, hosts, n, &errors);
        if (!errors.n)
            printf("%s: ok (%zu hosts in %s%s)\n", config_path, n, config.hosts_directory,
                   warnings.n ? ", with warnings" : "");
        cfg_hosts_free(hosts, n);
    }
    return cfg_errors_print(&errors, stderr) ? 1 : 0;
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
    /* The box's log keeper is this binary too, started by the daemon with
     * its listening socket (activator/log_keeper/log_keeper.h). */
    if (argc == 2 && strcmp(argv[1], LK_ARGUMENT) == 0)
        return lk_keeper_main(LK_LISTEN_FD);
    /* Before any lookup of a user: our own records are not the box's. */
    ad_userdb_bypass_self();
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
