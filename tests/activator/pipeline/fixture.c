/* The pipeline tests' shared fixture (see fixture.h). */
#include "fixture.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(sd_event_new(&f->loop), 0);
    fake_ops_init(&f->fake, f->loop);
    pl_config_init(&f->config);
    f->config.backoff_unit_usec = 20 * MSEC;
    f->config.ready_timeout_usec = 30 * MSEC;
    f->config.park_backoff_base_usec = 40 * MSEC;
    f->config.park_backoff_max_usec = 1000 * MSEC;
    *state = f;
    return 0;
}

int teardown(void **state)
{
    fixture *f = *state;
    if (f->host) {
        /* Let anything still in flight finish before freeing. */
        for (int i = 0; i < 200 && pl_host_free(f->host) == -EBUSY; i++)
            sd_event_run(f->loop, 10 * MSEC);
    }
    sd_event_unref(f->loop);
    free(f);
    return 0;
}

void make_host(fixture *f)
{
    act_error err = {0};
    assert_int_equal(pl_host_new(f->loop, "web1", &f->config, &f->fake.table, &f->fake,
                                 fake_on_event, &f->fake, &f->host, &err),
                     0);
}

void wake_and_wait(fixture *f, fake_result *result)
{
    assert_int_equal(pl_host_wake(f->host, PL_TRIGGER_CONNECTION, fake_on_done, result),
                     PL_WAKE_STARTED);
    assert_true(fake_run_until(f->loop, &result->count, 5000));
}

void serve(fixture *f)
{
    fake_result result = {0};
    wake_and_wait(f, &result);
    assert_int_equal(result.kind, PL_WAKE_SERVING);
}

void wait_parked(fixture *f)
{
    for (int i = 0; i < 500 && pl_host_get_state(f->host) != PL_HOST_PARKED; i++)
        sd_event_run(f->loop, 10 * MSEC);
    assert_int_equal(pl_host_get_state(f->host), PL_HOST_PARKED);
}
