/* Ownership across boxes is never wrong: a host reassigned back and forth
 * between two boxes fifty times runs on at most one of them at every
 * instant (both cgroup roots are sampled all along, not only between the
 * steps), and after each step it runs on the box the claim names, which the
 * claim says serves it. The same holds for an app that takes its whole
 * StopTimeoutSec to stop: the box the claim newly names waits for the old
 * one to release the host, which it does only once its generation is proven
 * stopped. */
#include <string.h>

#include "fleet.h"

/* Reassigns web between the two boxes steps times, checking after each step
 * that it runs on the box the claim names alone and the claim says so, and
 * that it never ran on two boxes at once. */
static void reassign_back_and_forth(fl_fleet *fl, int steps)
{
    fl_overlap_start(fl, "web");
    for (int step = 1; step <= steps; step++) {
        int target = step % 2;
        dh_daemon *box = &fl->boxes[target];
        fl_assign(fl, "web", fl_box_name((size_t)target));
        /* The box the claim newly names wakes the host by itself, once the
         * other box has released it. */
        DH_CHECK(box, fl_wait_running_on(fl, "web", (size_t)target, 15000),
                 "step %d: web does not run on %s alone within 15 s", step,
                 fl_box_name((size_t)target));
        DH_CHECK(box, dh_wait_state(box, "web", "serving", 10000),
                 "step %d: %s does not say it serves web", step, fl_box_name((size_t)target));
        claim current;
        DH_CHECK(box, dh_claim_get(box, "web", &current), "step %d: web has no claim", step);
        DH_CHECK(box,
                 strcmp(current.holder.box, fl_box_name((size_t)target)) == 0 &&
                     strcmp(current.op.phase, "serving") == 0,
                 "step %d: the claim names %s in phase %s, %s serves", step, current.holder.box,
                 current.op.phase, fl_box_name((size_t)target));
        DH_CHECK(box, atomic_load(&fl->overlap.most_running) <= 1,
                 "step %d: web ran on %zu boxes at once", step,
                 atomic_load(&fl->overlap.most_running));
    }
    unsigned samples = 0;
    size_t most_running = fl_overlap_stop(fl, &samples);
    DH_CHECK(&fl->boxes[0], most_running == 1 && samples > (unsigned)steps,
             "web ran on at most %zu boxes at once over %u samples", most_running, samples);
}

static void start_serving_on_box_1(fl_fleet *fl, const char *app_args)
{
    fl_setup(fl, 2, NULL);
    fl_add_host(fl, "web", app_args, NULL);
    fl_assign(fl, "web", fl_box_name(0));
    fl_start(fl);
    dh_wake(&fl->boxes[0], "web");
}

static void test_reassigned_fifty_times_never_runs_twice(void **state)
{
    fl_fleet *fl = *state;
    start_serving_on_box_1(fl, NULL);
    reassign_back_and_forth(fl, 50);
    for (size_t i = 0; i < fl->n_boxes; i++)
        dh_stop_and_check_clean(&fl->boxes[i]);
}

/* An app that ignores SIGTERM runs on for StopTimeoutSec (1 s) after its box
 * lost the claim: the box named next must not start beside it. */
static void test_a_slow_stop_is_waited_for(void **state)
{
    fl_fleet *fl = *state;
    start_serving_on_box_1(fl, "--ignore-sigterm");
    reassign_back_and_forth(fl, 4);
    for (size_t i = 0; i < fl->n_boxes; i++)
        dh_stop_and_check_clean(&fl->boxes[i]);
}

int main(void)
{
    int r = fl_check_can_run("fleet-reassign");
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        FL_TEST(test_reassigned_fifty_times_never_runs_twice),
        FL_TEST(test_a_slow_stop_is_waited_for),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
