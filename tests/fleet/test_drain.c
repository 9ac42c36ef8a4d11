/* Draining a box between real boxes on one etcd: activatorctl drain moves
 * every host a box runs, serving or parked, with its state to the other
 * boxes under a client's load, a few at a time, spread by load; no request
 * fails outside a move's serves-nowhere window and no count goes back; the
 * box's mark stays through a restart of its daemon and refuses an
 * assignment, a move to it and a host nobody claimed; undrain lifts it. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "fleet.h"

#define HOSTS 20
/* Hosts parked before the drain (the last ones): the drain moves them too. */
#define PARKED 4
#define HOST_LINES "ProbeTimeoutSec=8\nMaxStarts=1\n"

/* The shared checkpoint directory every box names. */
static char checkpoints[PATH_MAX];

typedef struct web {
    char name[16];
    int port;
} web;

static web webs[HOSTS];

static void remove_checkpoints(void)
{
    char command[PATH_MAX + 16];
    snprintf(command, sizeof(command), "rm -rf %s", checkpoints);
    if (checkpoints[0] && system(command) != 0)
        print_error("cannot remove %s\n", checkpoints);
}

/* The index of the box named, or -1. */
static int box_index(const fl_fleet *fl, const char *box)
{
    for (size_t i = 0; i < fl->n_boxes; i++)
        if (strcmp(fl_box_name(i), box) == 0)
            return (int)i;
    return -1;
}

/* A client that asks every serving host in turn at the box its claim
 * names, as a router reading the claims would. A request that fails while
 * the claim did not change around it (the same revision read before and
 * after) failed outside any move's window. */
typedef struct client {
    fl_fleet *fl;
    claim_store *store; /* its own: a store's synchronous calls are one thread's */
    pthread_t thread;
    atomic_bool stop;
    long last[HOSTS];
    atomic_uint answers;
    atomic_uint in_windows; /* failed while the claim changed: a move's window */
    atomic_uint failed;     /* failed while the claim stood still */
    atomic_uint backwards;  /* answers lower than one before */
    char first_failure[160];
} client;

static void ask_once(client *cl, size_t h)
{
    act_error err = {0};
    claim before = {0}, after = {0};
    if (claims_read(cl->store, webs[h].name, &before, &err) <= 0)
        return;
    int index = box_index(cl->fl, claim_executor(&before));
    if (index < 0 || before.op.kind != CLAIM_OP_SERVING || strcmp(before.op.phase, "serving") != 0)
        return; /* a move's window: the claim routes nowhere */
    long counter = fl_counter_at(cl->fl, (size_t)index, webs[h].port);
    if (counter < 0) {
        bool stood_still = claims_read(cl->store, webs[h].name, &after, &err) > 0 &&
                           after.revision == before.revision;
        if (!stood_still) {
            atomic_fetch_add(&cl->in_windows, 1);
            return;
        }
        if (atomic_fetch_add(&cl->failed, 1) == 0)
            snprintf(cl->first_failure, sizeof(cl->first_failure),
                     "%s on %s at claim revision %" PRIu64, webs[h].name,
                     fl_box_name((size_t)index), before.revision);
        return;
    }
    if (counter <= cl->last[h])
        atomic_fetch_add(&cl->backwards, 1);
    cl->last[h] = counter;
    atomic_fetch_add(&cl->answers, 1);
}

static void *client_run(void *arg)
{
    client *cl = arg;
    while (!atomic_load(&cl->stop))
        for (size_t h = 0; h < HOSTS - PARKED && !atomic_load(&cl->stop); h++)
            ask_once(cl, h);
    return NULL;
}

static bool client_answered(client *cl, unsigned count)
{
    dh_waiting_for("the client's answers to reach %u (up to 20 s)", count);
    uint64_t deadline = dd_now_ms() + 20000;
    while (atomic_load(&cl->answers) < count && dd_now_ms() < deadline)
        usleep(1000);
    return atomic_load(&cl->answers) >= count;
}

/* The claim says host is parked, and nothing of it runs: up to 10 s. */
static bool parked(fl_fleet *fl, const char *host)
{
    dh_waiting_for("%s to be parked (up to 10 s)", host);
    uint64_t deadline = dd_now_ms() + 10000;
    do {
        claim c = fl_claim_of(fl, host);
        if (strcmp(c.op.phase, "parked") == 0 && fl_running(fl, host, NULL) == 0)
            return true;
        usleep(20 * 1000);
    } while (dd_now_ms() < deadline);
    return false;
}

/* Three boxes; HOSTS hosts counting on box-1 (the last PARKED of them
 * parked after one request), and "fresh", configured everywhere and
 * claimed by nobody. */
static void start_fleet(fl_fleet *fl)
{
    dh_step("the fleet's start: %d hosts on box-1", HOSTS);
    char dir[] = "/tmp/act-drain-XXXXXX";
    assert_non_null(mkdtemp(dir));
    snprintf(checkpoints, sizeof(checkpoints), "%s", dir);
    char conf[PATH_MAX + 64];
    snprintf(conf, sizeof(conf), "Checkpoints=dir://%s\n", checkpoints);
    fl_setup(fl, 3, conf);
    for (size_t h = 0; h < HOSTS; h++) {
        snprintf(webs[h].name, sizeof(webs[h].name), "web-%02zu", h);
        webs[h].port = fl_add_host(fl, webs[h].name, "--counter", HOST_LINES);
        fl_assign(fl, webs[h].name, fl_box_name(0));
    }
    fl_add_host(fl, "fresh", NULL, HOST_LINES);
    fl_start(fl);
    for (size_t h = 0; h < HOSTS; h++)
        DH_CHECK(&fl->boxes[0], fl_counter_at(fl, 0, webs[h].port) == 1,
                 "%s does not answer 1 on box-1", webs[h].name);
    for (size_t h = HOSTS - PARKED; h < HOSTS; h++)
        dh_park(&fl->boxes[0], webs[h].name);
    for (size_t h = HOSTS - PARKED; h < HOSTS; h++)
        DH_CHECK(&fl->boxes[0], parked(fl, webs[h].name), "%s is not parked", webs[h].name);
}

static bool box_drained(fl_fleet *fl, const char *box)
{
    claims_box *boxes = NULL;
    size_t n = 0;
    act_error err = {0};
    if (claims_box_list_live(fl->store, &boxes, &n, &err) < 0)
        fail_msg("listing the boxes: %s", err.message);
    const claims_box *found = claims_box_find(boxes, n, box);
    bool drained = found && found->drained_usec;
    free(boxes);
    return drained;
}

static void test_a_drain_under_load_moves_every_host_with_its_state(void **state)
{
    fl_fleet *fl = *state;
    start_fleet(fl);
    client cl = {.fl = fl};
    act_error err = {0};
    if (claims_store_open(fl->store_url, NULL, &cl.store, &err) < 0)
        fail_msg("the client's store: %s", err.message);
    assert_int_equal(pthread_create(&cl.thread, NULL, client_run, &cl), 0);
    bool answered = client_answered(&cl, 2 * (HOSTS - PARKED));

    dh_step("activatorctl drain box-1");
    static char out[65536];
    int status = answered ? fl_ctl(fl, 1, out, sizeof(out), "drain", "box-1", "--parallel", "4",
                                   "--deadline", "60s", NULL)
                          : -1;
    printf("activatorctl drain box-1 said:\n%s", out);
    unsigned before = atomic_load(&cl.answers);
    bool answered_after = answered && client_answered(&cl, before + 2 * (HOSTS - PARKED));
    atomic_store(&cl.stop, true);
    pthread_join(cl.thread, NULL);
    claims_store_free(cl.store);
    DH_CHECK(&fl->boxes[0], answered, "the client got %u answers before the drain",
             atomic_load(&cl.answers));
    DH_CHECK(&fl->boxes[0], status == 0, "drain box-1 exited %d: %s", status, out);
    DH_CHECK(&fl->boxes[0], strstr(out, "20 hosts moved"), "drain did not say so: %s", out);
    DH_CHECK(&fl->boxes[1], answered_after, "the client got %u answers after the drain",
             atomic_load(&cl.answers) - before);
    print_message("the client: %u answers, %u requests failed in a move's window, %u outside\n",
                  atomic_load(&cl.answers), atomic_load(&cl.in_windows), atomic_load(&cl.failed));
    DH_CHECK(&fl->boxes[0], atomic_load(&cl.failed) == 0,
             "%u requests failed outside a move's window (first: %s); %u inside one",
             atomic_load(&cl.failed), cl.first_failure, atomic_load(&cl.in_windows));
    DH_CHECK(&fl->boxes[0], atomic_load(&cl.backwards) == 0,
             "%u answers counted lower than one before", atomic_load(&cl.backwards));

    /* Every host runs on one other box alone, with the count it had: the
     * parked ones answered 1 before, so 2 now unless the state was lost. */
    size_t on[3] = {0};
    for (size_t h = 0; h < HOSTS; h++) {
        claim c = fl_claim_of(fl, webs[h].name);
        int index = box_index(fl, claim_executor(&c));
        DH_CHECK(&fl->boxes[0], index > 0, "%s's claim names box '%s'", webs[h].name,
                 claim_executor(&c));
        DH_CHECK(&fl->boxes[index], fl_serves_on(fl, webs[h].name, (size_t)index, 5000),
                 "%s does not serve on %s alone", webs[h].name, fl_box_name((size_t)index));
        long counter = fl_counter_at(fl, (size_t)index, webs[h].port);
        long least = h < HOSTS - PARKED ? cl.last[h] + 1 : 2;
        DH_CHECK(&fl->boxes[index], counter >= least, "%s answers %ld on %s; it had counted to %ld",
                 webs[h].name, counter, fl_box_name((size_t)index), least - 1);
        on[index]++;
    }
    /* Spread by load: neither box took them all. */
    DH_CHECK(&fl->boxes[1], on[1] >= HOSTS / 4 && on[2] >= HOSTS / 4,
             "box-2 took %zu hosts, box-3 %zu", on[1], on[2]);

    dh_step("the drained box refuses new hosts");
    status = fl_ctl(fl, 1, out, sizeof(out), "boxes", NULL);
    DH_CHECK(&fl->boxes[1], status == 0 && strstr(out, "live, drained"),
             "boxes does not show box-1 drained (%d): %s", status, out);
    claim before_refusals = fl_claim_of(fl, webs[0].name);
    status = fl_ctl(fl, -1, out, sizeof(out), "claim", "assign", webs[0].name, "box-1", NULL);
    DH_CHECK(&fl->boxes[1], status == 1 && strstr(out, "box_drained"),
             "an assignment to the drained box exited %d: %s", status, out);
    status =
        fl_ctl(fl, -1, out, sizeof(out), "claim", "assign", webs[0].name, "box-1", "--force", NULL);
    DH_CHECK(&fl->boxes[1], status == 1 && strstr(out, "box_drained"),
             "a forced assignment to the drained box exited %d: %s", status, out);
    status = fl_ctl(fl, 1, out, sizeof(out), "move", webs[0].name, "box-1", NULL);
    DH_CHECK(&fl->boxes[1], status == 1 && strstr(out, "box_drained"),
             "a move to the drained box exited %d: %s", status, out);
    DH_CHECK(&fl->boxes[1], fl_claim_of(fl, webs[0].name).revision == before_refusals.revision,
             "a refusal changed %s's claim", webs[0].name);
    status = fl_ctl(fl, 0, out, sizeof(out), "wake", "fresh", NULL);
    DH_CHECK(&fl->boxes[0], status != 0 && strstr(out, "drained"),
             "the drained box woke a host nobody claimed (%d): %s", status, out);
    DH_CHECK(&fl->boxes[0], fl_claim_of(fl, "fresh").revision == 0,
             "the drained box claimed fresh");

    dh_step("the mark outlives a restart of box-1's daemon");
    dh_stop_and_check_clean(&fl->boxes[0]);
    dh_start(&fl->boxes[0], NULL);
    DH_CHECK(&fl->boxes[0], box_drained(fl, "box-1"), "box-1 is not drained after its restart");

    dh_step("undrain box-1");
    status = fl_ctl(fl, -1, out, sizeof(out), "undrain", "box-1", NULL);
    DH_CHECK(&fl->boxes[0], status == 0, "undrain exited %d: %s", status, out);
    DH_CHECK(&fl->boxes[0], !box_drained(fl, "box-1"), "box-1 is still drained");
    status = fl_ctl(fl, 0, out, sizeof(out), "wake", "fresh", NULL);
    DH_CHECK(&fl->boxes[0], status == 0, "box-1 undrained does not wake fresh (%d): %s", status,
             out);
    for (size_t i = 0; i < fl->n_boxes; i++)
        dh_stop_and_check_clean(&fl->boxes[i]);
    remove_checkpoints();
}

/* Bad input changes nothing: a bad box name, a bad --parallel or
 * --deadline is refused before anything is written. */
static void test_bad_drains_are_refused_with_nothing_changed(void **state)
{
    fl_fleet *fl = *state;
    fl_setup(fl, 1, NULL);
    char out[4096];
    const char *const bad[][4] = {
        {"drain", "../box-1", NULL},
        {"drain", "box-1", "--parallel", "0"},
        {"drain", "box-1", "--parallel", "33"},
        {"drain", "box-1", "--deadline", "soon"},
        {"undrain", NULL},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int status =
            fl_ctl(fl, -1, out, sizeof(out), bad[i][0], bad[i][1], bad[i][2], bad[i][3], NULL);
        DH_CHECK(&fl->boxes[0], status == 2 && strstr(out, bad[i][0]),
                 "activatorctl %s %s %s exited %d: %s", bad[i][0], bad[i][1] ? bad[i][1] : "",
                 bad[i][2] ? bad[i][2] : "", status, out);
    }
    DH_CHECK(&fl->boxes[0], !box_drained(fl, "box-1"), "a refused drain marked box-1");
    /* A drain of a box that runs nothing marks it and is done. */
    int status = fl_ctl(fl, -1, out, sizeof(out), "drain", "box-1", NULL);
    DH_CHECK(&fl->boxes[0], status == 0 && strstr(out, "0 hosts moved"),
             "drain of an empty box exited %d: %s", status, out);
    DH_CHECK(&fl->boxes[0], box_drained(fl, "box-1"), "box-1 is not drained");
}

int main(void)
{
    int r = fl_check_can_run("fleet-drain");
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        FL_TEST(test_bad_drains_are_refused_with_nothing_changed),
        FL_TEST(test_a_drain_under_load_moves_every_host_with_its_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
