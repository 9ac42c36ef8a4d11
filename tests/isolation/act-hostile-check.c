/* act-hostile-check: the hostile-tenant scenario (hostile_check.h) against
 * an activatord that someone else runs, such as systemd in the container of
 * units/hostile-under-systemd.sh. The hosts must be serving already; the
 * ordinary host's output is looked for in the journal.
 *
 *   act-hostile-check --state-dir DIR --runtime-dir DIR \
 *       --hostile HOST:PORT --ordinary HOST:PORT --pids-max N [--flood-ms N]
 *
 * --pids-max is the hostile host's PidsMax=, the cap its fork bomb drives.
 * Exits 0 when every attempt failed and the box kept serving. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hostile_check.h"

/* Looks for text in the journal: the lines of every stream, which is where
 * an app's output goes under systemd, shared or its own. */
static bool journal_has(const char *text, int timeout_ms, void *userdata)
{
    (void)userdata;
    for (int waited = 0; waited <= timeout_ms; waited += 250) {
        FILE *journal = popen("journalctl --no-pager -q -o cat -n 5000 2>/dev/null", "r");
        bool found = false;
        char line[4096];
        while (journal && fgets(line, sizeof(line), journal))
            found = found || strstr(line, text);
        if (journal)
            pclose(journal);
        if (found)
            return true;
        usleep(250 * 1000);
    }
    return false;
}

static bool host_port(const char *arg, char *host, size_t size, int *port)
{
    const char *colon = strrchr(arg, ':');
    if (!colon || colon == arg || (size_t)(colon - arg) >= size)
        return false;
    snprintf(host, size, "%.*s", (int)(colon - arg), arg);
    *port = atoi(colon + 1);
    return *port > 0 && *port < 65536;
}

int main(int argc, char **argv)
{
    static char control[4200], events[4200], hostile[128], ordinary[128];
    hostile_setup setup = {.flood_ms = 10000, .log_has = journal_has};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *key = argv[i], *value = argv[i + 1];
        if (strcmp(key, "--state-dir") == 0)
            setup.state_dir = value;
        else if (strcmp(key, "--runtime-dir") == 0)
            setup.runtime_dir = value;
        else if (strcmp(key, "--hostile") == 0 &&
                 host_port(value, hostile, sizeof(hostile), &setup.hostile_port))
            setup.hostile_host = hostile;
        else if (strcmp(key, "--ordinary") == 0 &&
                 host_port(value, ordinary, sizeof(ordinary), &setup.ordinary_port))
            setup.ordinary_host = ordinary;
        else if (strcmp(key, "--pids-max") == 0) {
            char *end = NULL;
            setup.pids_max = strtol(value, &end, 10);
            if (!end || *end || setup.pids_max < 8 || setup.pids_max > 1000000) {
                fprintf(stderr, "act-hostile-check: --pids-max %s: not a number from 8 to "
                                "1000000; give the hostile host's PidsMax=\n", value);
                return 2;
            }
        }
        else if (strcmp(key, "--flood-ms") == 0)
            setup.flood_ms = atoi(value);
        else {
            fprintf(stderr, "act-hostile-check: unknown or incomplete argument %s\n", key);
            return 2;
        }
    }
    if (!setup.state_dir || !setup.runtime_dir || !setup.hostile_host || !setup.ordinary_host ||
        !setup.pids_max) {
        fprintf(stderr, "usage: act-hostile-check --state-dir DIR --runtime-dir DIR "
                        "--hostile HOST:PORT --ordinary HOST:PORT --pids-max N "
                        "[--flood-ms N]\n");
        return 2;
    }
    snprintf(control, sizeof(control), "ipc://%s/control.ipc", setup.runtime_dir);
    snprintf(events, sizeof(events), "ipc://%s/events.ipc", setup.runtime_dir);
    setup.control_url = control;
    setup.events_url = events;
    hostile_outcome outcome;
    return hostile_run(&setup, &outcome, stdout);
}
