/* activatorctl: the operator's command line for activatord. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "activator/ctl/client.h"
#include "activator/ctl/commands.h"

/* Not an exit code: the command line so far is fine, go on. */
#define GO_ON (-1)

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

/* --timeout's whole seconds, 1 to 86400. */
static int parse_timeout(const char *text, int *seconds_out)
{
    char *end;
    long seconds = strtol(text, &end, 10);
    if (*end || seconds < 1 || seconds > 86400) {
        fprintf(stderr,
                "activatorctl: --timeout %s: give whole seconds from 1 to "
                "86400\n",
                text);
        return CTL_EXIT_USAGE;
    }
    *seconds_out = (int)seconds;
    return GO_ON;
}

/* One option before the command, into options: GO_ON, or the exit code. */
static int apply_option(int opt, const char *arg, const char *given, ctl_options *options,
                        bool *no_color)
{
    switch (opt) {
    case OPT_CONNECT:
        options->connect_url = arg;
        return GO_ON;
    case OPT_EVENTS:
        options->events_url = arg;
        return GO_ON;
    case 'j':
        options->json = true;
        return GO_ON;
    case OPT_TIMEOUT:
        return parse_timeout(arg, &options->timeout_sec);
    case OPT_CERT:
        options->tls_cert = arg;
        return GO_ON;
    case OPT_KEY:
        options->tls_key = arg;
        return GO_ON;
    case OPT_CA:
        options->tls_ca = arg;
        return GO_ON;
    case OPT_NO_COLOR:
        *no_color = true;
        return GO_ON;
    case OPT_STORE:
        options->store_url = arg;
        return GO_ON;
    case OPT_STORE_CA:
        options->store_ca = arg;
        return GO_ON;
    case OPT_STORE_CERT:
        options->store_cert = arg;
        return GO_ON;
    case OPT_STORE_KEY:
        options->store_key = arg;
        return GO_ON;
    case 'h':
        ctl_print_main_usage(stdout);
        return CTL_EXIT_OK;
    default:
        fprintf(stderr,
                "activatorctl: unknown or incomplete option '%s'\nTry 'activatorctl "
                "--help'.\n",
                given);
        return CTL_EXIT_USAGE;
    }
}

/* The options before the command (optind ends on it): GO_ON, or the exit
 * code. */
static int parse_options(int argc, char **argv, ctl_options *options, bool *no_color)
{
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
        int r = apply_option(opt, optarg, argv[optind - 1], options, no_color);
        if (r != GO_ON)
            return r;
    }
    return GO_ON;
}

/* The options that only go together: GO_ON, or CTL_EXIT_USAGE. */
static int check_store_options(const ctl_options *options)
{
    if (!options->store_url && (options->store_ca || options->store_cert || options->store_key)) {
        fprintf(stderr, "activatorctl: --store-ca, --store-cert and --store-key go with --store "
                        "URL\n");
        return CTL_EXIT_USAGE;
    }
    if (!options->store_cert != !options->store_key) {
        fprintf(stderr, "activatorctl: --store-cert and --store-key come together\n");
        return CTL_EXIT_USAGE;
    }
    return GO_ON;
}

static bool wants_color(bool no_color)
{
    const char *term = getenv("TERM");
    return !no_color && isatty(STDOUT_FILENO) && !getenv("NO_COLOR") &&
           !(term && strcmp(term, "dumb") == 0);
}

/* argv[0] is the command's name. */
static int run_command(const ctl_options *options, int argc, char **argv)
{
    const ctl_command *command = ctl_command_find(argv[0]);
    if (!command) {
        fprintf(stderr, "activatorctl: unknown command '%s'\nTry 'activatorctl --help'.\n",
                argv[0]);
        return CTL_EXIT_USAGE;
    }
    return ctl_command_run(command, options, argc, argv);
}

int main(int argc, char **argv)
{
    ctl_options options = {.connect_url = CTL_DEFAULT_CONTROL_URL};
    bool no_color = false;
    int r = parse_options(argc, argv, &options, &no_color);
    if (r == GO_ON)
        r = check_store_options(&options);
    if (r != GO_ON)
        return r;
    if (optind >= argc) {
        fprintf(stderr, "activatorctl: missing COMMAND\n");
        ctl_print_main_usage(stderr);
        return CTL_EXIT_USAGE;
    }
    options.color = wants_color(no_color);
    return run_command(&options, argc - optind, argv + optind);
}
