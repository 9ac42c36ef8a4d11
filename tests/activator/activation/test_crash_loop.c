/* A crash loop degrades only itself, on the real daemon.
 *
 * Host "loop" runs a build that exits with status 1 at once (act-testapp
 * --exit-immediately 1, MaxStarts=1), so every wake gives up and is a
 * failure park, and a client's connection that nobody accepts keeps demand
 * on its socket. The daemon must re-activate it after 25 ms · 2^(n-1) each
 * time (read from the events' timestamps: each wake's end to the next
 * admission), and meanwhile cold wakes of another host must stay within
 * twice their latency measured before the loop started (medians). */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "activation.h"

/* Cold wakes measured in each phase; the median is compared. */
#define WAKES 7
#define MAX_WAKES 20
/* Wakes of the loop to look at: seven re-activations, after 25 ms .. 1.6 s. */
#define LOOP_WAKES 8
#define BACKOFF_BASE_MS 25.0

/* One cold wake of host by a connection: the time from connect to the whole
 * answer, in ms. Then parks it again and waits until it is parked. */
static double cold_wake_ms(dh_daemon *d, const char *host, int port)
{
    DH_CHECK(d, dh_wait_state(d, host, "parked", 10000), "%s is not parked before a cold wake",
             host);
    ah_sample sample;
    int r = ah_get(port, &sample);
    DH_CHECK(d, r == 0, "cold wake of %s failed at %s: %s", host, sample.failed_at, strerror(r));
    /* The app answers once ready, a moment before the daemon publishes it;
     * the park waits for the wake to end, so that it parks a serving host
     * rather than cancelling the wake (which test_demand covers). */
    DH_CHECK(d, dh_wait_state(d, host, "serving", 10000), "%s does not serve after its wake", host);
    dh_park(d, host);
    DH_CHECK(d, dh_wait_state(d, host, "parked", 10000), "%s did not park", host);
    return ((double)sample.end_usec - (double)sample.start_usec) / 1000.0;
}

/* How many times the loop host was admitted (a re-activation) since. */
static size_t loop_admissions_since(dh_daemon *d, uint64_t since_usec)
{
    dh_events_pump(d, 0);
    size_t count = 0;
    for (size_t i = 0; i < d->n_events; i++)
        count += strcmp(d->events[i].host, "loop") == 0 &&
                 strcmp(d->events[i].name, "admitted") == 0 && d->events[i].time_usec >= since_usec;
    return count;
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET,
                               .sin_port = htons((uint16_t)port),
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0)
        fail_msg("connect to port %d: %s", port, strerror(errno));
    return fd;
}

/* The loop host's wakes, in order: each one's admission and its end (the
 * "failed" event without a generation: the wake gave up). */
typedef struct loop_wake {
    dh_event admitted;
    dh_event gave_up;
    bool ended;
} loop_wake;

static size_t collect_loop_wakes(dh_daemon *d, uint64_t mark, loop_wake *wakes, size_t max)
{
    size_t n = 0;
    uint64_t after = mark;
    while (n < max) {
        const dh_event *admitted = ah_find_event(d, "loop", "admitted", 0, after);
        if (!admitted)
            break;
        const dh_event *gave_up = NULL;
        for (uint64_t seq = admitted->seq;;) {
            const dh_event *failed = ah_find_event(d, "loop", "failed", 0, seq);
            if (!failed || failed->generation == 0) {
                gave_up = failed;
                break;
            }
            seq = failed->seq;
        }
        wakes[n++] = (loop_wake){
            .admitted = *admitted, .gave_up = gave_up ? *gave_up : (dh_event){0}, .ended = gave_up};
        if (!gave_up)
            break;
        after = gave_up->seq;
    }
    return n;
}

static void print_loop(const loop_wake *wakes, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "loop wake %zu: admitted at %" PRIu64 ", gave up at %" PRIu64 "\n", i + 1,
                wakes[i].admitted.time_usec, wakes[i].gave_up.time_usec);
}

static void test_crash_loop_backs_off_and_degrades_only_itself(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    int loop_port = dh_add_app_host(d, "loop", "--exit-immediately 1", "MaxStarts=1\n");
    int other_port = dh_add_app_host(d, "other", NULL, NULL);
    dh_start(d, NULL);

    /* The other host's normal cold-wake latency; the first wake (the claim
     * is created then) is left out. */
    cold_wake_ms(d, "other", other_port);
    double before[WAKES], during[MAX_WAKES];
    for (int i = 0; i < WAKES; i++)
        before[i] = cold_wake_ms(d, "other", other_port);

    /* A client whose connection nobody accepts keeps demand on loop. */
    dh_events_mark(d);
    uint64_t mark = d->mark;
    int demand = connect_to(loop_port);
    dh_event first_exec;
    DH_CHECK(d, dh_event_wait(d, "loop", "exec", 5000, &first_exec),
             "a connection did not wake the crash-looping host");
    /* After the first failure park the waiting connection must wake it again
     * (after 25 ms); without that there is no loop to measure. */
    uint64_t first_exec_seq = first_exec.seq;
    d->mark = first_exec_seq;
    DH_CHECK(d, dh_event_wait(d, "loop", "exec", 3000, NULL),
             "the host did not re-activate within 3 s of its first failure park although a "
             "client's connection waits in its socket (expected after 25 ms)");
    d->mark = mark;

    /* Cold wakes of the other host while the loop runs: at least WAKES, and
     * on until three of the loop's activations fell among them. */
    uint64_t measure_from = ah_wallclock_usec();
    size_t n_during = 0;
    while (n_during < MAX_WAKES && (n_during < WAKES || loop_admissions_since(d, measure_from) < 3))
        during[n_during++] = cold_wake_ms(d, "other", other_port);
    uint64_t measure_to = ah_wallclock_usec();

    /* Enough re-activations to see the doubling: 25 ms .. 1.6 s. */
    uint64_t deadline = ah_wallclock_usec() + 20 * 1000000ull;
    loop_wake wakes[LOOP_WAKES];
    size_t n = 0;
    while ((n = collect_loop_wakes(d, mark, wakes, LOOP_WAKES)) < LOOP_WAKES) {
        DH_CHECK(d, ah_wallclock_usec() < deadline,
                 "only %zu re-activations of the crash-looping host within 20 s", n);
        dh_events_pump(d, 100);
    }
    close(demand);

    /* The backoff: from the end of wake k to the admission of wake k+1, at
     * least 25 ms · 2^(k-1) (the daemon must honour it) and at most that
     * plus the read and admission of a wake (generous bounds: the machine is
     * shared), and doubling from one to the next. */
    double gaps[LOOP_WAKES];
    for (size_t k = 1; k < LOOP_WAKES; k++) {
        double expected = BACKOFF_BASE_MS * (double)(1u << (k - 1));
        gaps[k] =
            ((double)wakes[k].admitted.time_usec - (double)wakes[k - 1].gave_up.time_usec) / 1000.0;
        fprintf(stderr, "failure park %zu: re-activated after %.1f ms (backoff %.0f ms)\n", k,
                gaps[k], expected);
        if (gaps[k] < expected * 0.9 || gaps[k] > expected * 1.5 + 400) {
            print_loop(wakes, n);
            DH_CHECK(d, false,
                     "after failure park %zu the host was re-activated after %.1f ms, expected "
                     "the backoff 25 ms * 2^%zu = %.0f ms (plus the wake's own read and admit)",
                     k, gaps[k], k - 1, expected);
        }
    }
    /* The doubling is read where the backoff dwarfs a wake's own read and
     * admit (which the other host's wakes on the same loop make vary by
     * 100 ms or more): 400 ms -> 800 ms -> 1.6 s. */
    for (size_t k = 5; k + 1 < LOOP_WAKES; k++) {
        double ratio = gaps[k + 1] / gaps[k];
        DH_CHECK(d, ratio >= 1.4 && ratio <= 2.6,
                 "the backoff does not double: %.1f ms after failure park %zu, %.1f ms after "
                 "park %zu",
                 gaps[k], k, gaps[k + 1], k + 1);
    }
    json_object *status = dh_status(d, "loop");
    uint64_t streak = dh_json_u64(status, "failure_streak");
    json_object_put(status);
    DH_CHECK(d, streak >= LOOP_WAKES - 1, "failure_streak is %" PRIu64 " after %d failure parks",
             streak, LOOP_WAKES - 1);

    /* The measured wakes of the other host ran while the loop did. */
    size_t overlapping = 0;
    for (size_t i = 0; i < n; i++)
        overlapping += wakes[i].admitted.time_usec >= measure_from &&
                       wakes[i].admitted.time_usec <= measure_to;
    DH_CHECK(d, overlapping >= 3,
             "only %zu of the loop's activations fell among the other host's measured wakes",
             overlapping);
    double median_before = ah_median(before, WAKES), median_during = ah_median(during, n_during);
    fprintf(stderr, "other host cold wake: median %.1f ms before the crash loop, %.1f ms during\n",
            median_before, median_during);
    DH_CHECK(d, median_during <= 2 * median_before,
             "a crash-looping host slowed another host's cold wakes from %.1f ms to %.1f ms "
             "(medians of %d and %zu), more than twice",
             median_before, median_during, WAKES, n_during);
    dh_stop_and_check_clean(d);
}

int main(void)
{
    int r = dh_check_can_run("activation-crash-loop", DH_STORE_DIR);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_crash_loop_backs_off_and_degrades_only_itself),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
