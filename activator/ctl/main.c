/* activatorctl: the operator's command line for activatord. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "activator/ctl/client.h"
#include "activator/ctl/commands.h"

int main(int argc, char **argv)
{
    ctl_options options = {.connect_url = CTL_DEFAULT_CONTROL_URL};
    bool no_color = false;
    enum {
        OPT_CONNECT = 256,
        OPT_EVENTS,
        OPT_TIMEOUT,
        OPT_CERT,
        OPT_KEY,
        OPT_CA,
        OPT_NO_COLOR,
        OPT_STORE,
        OPT_STORE_CA,
        OPT_STORE_CERT,
        OPT_STORE_KEY,
    };
    static const struct option longopts[] = {
        {"connect", required_argument, 0, OPT_CONNECT},
        {"events", required_argument, 0, OPT_EVENTS},
        {"json", no_argument, 0, 'j'},
        {"timeout", required_argument, 0, OPT_TIMEOUT},
        {"tls-cert", required_argument, 0, OPT_CERT},
        {"tls-key", required_argument, 0, OPT_KEY},
        {"tls-ca", required_argument, 0, OPT_CA},
        {"no-color", no_argument, 0, OPT_NO_COLOR},
        {"store", required_argument, 0, OPT_STORE},
        {"store-ca", required_argument, 0, OPT_STORE_CA},
        {"store-cert", required_argument, 0, OPT_STORE_CERT},
        {"store-key", required_argument, 0, OPT_STORE_KEY},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    opterr = 0;
    int opt;
    /* "+": stop at the command; its own options are parsed by the command. */
    while ((opt = getopt_long(argc, argv, "+hj", longopts, NULL)) != -1) {
        switch (opt) {
        case OPT_CONNECT:
            options.connect_url = optarg;
            break;
        case OPT_EVENTS:
            options.events_url = optarg;
            break;
        case 'j':
            options.json = true;
            break;
        case OPT_TIMEOUT: {
            char *end;
            long seconds = strtol(optarg, &end, 10);
            if (*end || seconds < 1 || seconds > 86400) {
                fprintf(stderr, "activatorctl: --timeout %s: give whole seconds from 1 to "
                                "86400\n",
                        optarg);
                return CTL_EXIT_USAGE;
            }
            options.timeout_sec = (int)seconds;
            break;
        }
        case OPT_CERT:
            options.tls_cert = optarg;
            break;
        case OPT_KEY:
            options.tls_key = optarg;
            break;
        case OPT_CA:
            options.tls_ca = optarg;
            break;
        case OPT_NO_COLOR:
            no_color = true;
            break;
        case OPT_STORE:
            options.store_url = optarg;
            break;
        case OPT_STORE_CA:
            options.store_ca = optarg;
            break;
        case OPT_STORE_CERT:
            options.store_cert = optarg;
            break;
        case OPT_STORE_KEY:
            options.store_key = optarg;
            break;
        case 'h':
            ctl_print_main_usage(stdout);
            return CTL_EXIT_OK;
        default:
            fprintf(stderr, "activatorctl: unknown or incomplete option '%s'\nTry 'activatorctl "
                            "--help'.\n",
                    argv[optind - 1]);
            return CTL_EXIT_USAGE;
        }
    }
    if (!options.store_url && (options.store_ca || options.store_cert || options.store_key)) {
        fprintf(stderr, "activatorctl: --store-ca, --store-cert and --store-key go with --store "
                        "URL\n");
        return CTL_EXIT_USAGE;
    }
    if (!options.store_cert != !options.store_key) {
        fprintf(stderr, "activatorctl: --store-cert and --store-key come together\n");
        return CTL_EXIT_USAGE;
    }
    if (optind >= argc) {
        fprintf(stderr, "activatorctl: missing COMMAND\n");
        ctl_print_main_usage(stderr);
        return CTL_EXIT_USAGE;
    }
    const char *term = getenv("TERM");
    options.color = !no_color && isatty(STDOUT_FILENO) && !getenv("NO_COLOR") &&
                    !(term && strcmp(term, "dumb") == 0);

    const ctl_command *command = ctl_command_find(argv[optind]);
    if (!command) {
        fprintf(stderr, "activatorctl: unknown command '%s'\nTry 'activatorctl --help'.\n",
                argv[optind]);
        return CTL_EXIT_USAGE;
    }
    return ctl_command_run(command, &options, argc - optind, argv + optind);
}
