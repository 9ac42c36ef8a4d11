/* Two boxes on one etcd, one host configured on both:
 *   - the claim decides: the box it names serves the host, the other box
 *     refuses a wake with not_owner and runs nothing of it;
 *   - each box's host binds the box's own loopback address, so the same port
 *     is served on both addresses without a clash. */
#include <string.h>

#include "fleet.h"

static void test_the_claim_decides_which_box_serves(void **state)
{
    fl_fleet *fl = *state;
    fl_setup(fl, 2, NULL);
    fl_add_host(fl, "web", NULL, NULL);
    fl_assign(fl, "web", fl_box_name(1));
    fl_start(fl);

    dh_served served = dh_wake(&fl->boxes[1], "web");
    int running_on = -1;
    size_t running = fl_running(fl, "web", &running_on);
    DH_CHECK(&fl->boxes[1], running == 1 && running_on == 1,
             "web runs on %zu boxes (last found on index %d), expected box-2 alone", running,
             running_on);

    json_object *reply = dh_wake_reply(&fl->boxes[0], "web", 10000);
    bool refused = !dh_reply_ok(reply) && strcmp(dh_reply_code(reply), "not_owner") == 0;
    char text[512];
    snprintf(text, sizeof(text), "%s", json_object_to_json_string(reply));
    json_object_put(reply);
    DH_CHECK(&fl->boxes[0], refused, "box-1 did not refuse a wake of box-2's host: %s", text);
    DH_CHECK(&fl->boxes[0], fl_running(fl, "web", &running_on) == 1 && running_on == 1,
             "box-1's refused wake left web running on %zu boxes", running);

    claim current;
    DH_CHECK(&fl->boxes[1], dh_claim_get(&fl->boxes[1], "web", &current), "web has no claim");
    DH_CHECK(&fl->boxes[1],
             strcmp(current.holder.box, fl_box_name(1)) == 0 &&
                 current.holder.generation == served.generation,
             "the claim names %s generation %llu, box-2 serves generation %llu", current.holder.box,
             (unsigned long long)current.holder.generation,
             (unsigned long long)served.generation);
    for (size_t i = 0; i < fl->n_boxes; i++)
        dh_stop_and_check_clean(&fl->boxes[i]);
}

int main(void)
{
    int r = fl_check_can_run("fleet-basics");
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        FL_TEST(test_the_claim_decides_which_box_serves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
