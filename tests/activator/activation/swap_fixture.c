/* What the swap tests share: a fixture that also stops their load, and the
 * wake that starts the generation a swap replaces. */
#include "activation.h"

#include <stdlib.h>

ah_load *ah_current_load;

int ah_load_fixture_setup(void **state)
{
    *state = calloc(1, sizeof(dh_daemon));
    return *state ? 0 : -1;
}

int ah_load_fixture_teardown(void **state)
{
    /* Stopped before the daemon, so no thread keeps requesting a host that
     * is going away, also when a check failed with the load running. */
    ah_load_free(ah_current_load);
    ah_current_load = NULL;
    int r = dh_teardown(*state);
    free(*state);
    return r;
}

void ah_wake_serving(dh_daemon *d, const char *host, uint64_t *generation, pid_t *pid)
{
    dh_served served = dh_wake(d, host);
    *generation = served.generation;
    *pid = served.pid;
    DH_CHECK(d, *generation > 0 && *pid > 0, "the wake did not name a generation and a pid");
}
