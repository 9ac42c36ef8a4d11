/* act-soak: see soak.h. Usage:
 *   act-soak [--duration 75s|30m|1h|8h] [--seed N] [--boxes 2|3] [--only FAULT,...]
 * SOAK_DURATION and SOAK_SEED say the same from the environment (the flags
 * win); SOAK_VERBOSE=1 prints every fault as it is made. Exits 0 when
 * nothing broke, 1 when an invariant broke (the logs are kept and their
 * paths printed), 77 when it cannot run here (no root, no cgroup2, no
 * etcd).
 *
 * --undeclared FAULT is the soak's test of itself: FAULT is made but its
 * windows are not declared, so the client failures it causes are
 * unexplained and must break "every failed request is in a fault's
 * window". Then the exit status is inverted: 0 when that invariant broke
 * first, 1 when the run passed or something else broke. */
#include "soak.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"

/* A lull every this long: faults pause while what holds only at rest is
 * checked. */
#define LULL_EVERY_MS 20000

uint64_t soak_now_ms(void)
{
    return act_now_usec() / 1000;
}

uint64_t soak_random(soak *s)
{
    /* xorshift64*: small, and the same sequence for the same seed. */
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return s->rng * 0x2545F4914F6CDD1DULL;
}

uint64_t soak_random_below(soak *s, uint64_t n)
{
    return n ? soak_random(s) % n : 0;
}

/* "75s", "30m", "1h", "1h30m", "90" (seconds) in ms; 0 when it is none. */
static uint64_t parse_duration(const char *text)
{
    uint64_t total = 0;
    const char *p = text;
    while (*p) {
        char *end = NULL;
        errno = 0;
        unsigned long long value = strtoull(p, &end, 10);
        if (errno || end == p)
            return 0;
        uint64_t unit = 1000;
        if (*end == 'h')
            unit = 3600 * 1000;
        else if (*end == 'm' && end[1] != 's')
            unit = 60 * 1000;
        else if (*end == 'm' && end[1] == 's')
            unit = 1, end++;
        else if (*end && *end != 's')
            return 0;
        total += value * unit;
        p = *end ? end + 1 : end;
    }
    return total;
}

static int usage(void)
{
    fprintf(stderr, "usage: act-soak [--duration 75s|30m|1h] [--seed N] [--boxes 2|3] [--only "
                    "FAULT,...]\n"
                    "               [--undeclared FAULT]\n");
    return 2;
}

static int parse_args(soak *s, int argc, char **argv)
{
    const char *duration = getenv("SOAK_DURATION"), *seed = getenv("SOAK_SEED");
    s->n_boxes = SOAK_BOXES_DEFAULT;
    s->undeclared = -1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--duration") == 0 && i + 1 < argc)
            duration = argv[++i];
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
            seed = argv[++i];
        else if (strcmp(argv[i], "--boxes") == 0 && i + 1 < argc)
            s->n_boxes = (size_t)atoi(argv[++i]);
        else if (strcmp(argv[i], "--undeclared") == 0 && i + 1 < argc) {
            s->undeclared = soak_fault_by_token(argv[++i]);
            if (s->undeclared < 0)
                return usage();
        } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            if (soak_faults_only(s, argv[++i]) < 0)
                return 2;
        } else
            return usage();
    }
    s->duration_ms = parse_duration(duration && duration[0] ? duration : "75s");
    if (!s->duration_ms || s->n_boxes < 2 || s->n_boxes > 3)
        return usage();
    if (seed && seed[0])
        s->seed = strtoull(seed, NULL, 10);
    else
        s->seed = ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid() ^ act_now_usec();
    /* splitmix64 of the seed, so that 1, 2, 3 start far apart. */
    uint64_t z = s->seed + 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    s->rng = (z ^ (z >> 31)) | 1;
    return 0;
}

/* Every host woken once on its box, so the baseline is of a daemon that
 * has run each of them. */
static void warm_up(soak *s)
{
    for (size_t i = 0; i < s->n_hosts; i++) {
        int route = atomic_load(&s->hosts[i].route);
        json_object *reply =
            soak_request(s, route < 0 ? 0 : (size_t)route, 30000,
                         "{\"v\":1,\"op\":\"wake\",\"host\":\"%s\"}", s->hosts[i].name);
        json_object_put(reply);
    }
}

/* The exit status of a run that broke s->first_broken (or nothing, with
 * broken false). */
static int exit_status(const soak *s, bool broken)
{
    if (s->undeclared < 0)
        return broken ? 1 : 0;
    bool caught = broken && s->first_broken == I_FAILURES;
    printf("soak: self-test: %s's windows were not declared; %s\n",
           soak_fault_name((soak_fault_kind)s->undeclared),
           caught ? "the failures it made were caught" : "NOT caught as unexplained failures");
    return caught ? 0 : 1;
}

static int finish_broken(soak *s)
{
    atomic_store(&s->stop_clients, true);
    soak_clients_stop(s);
    soak_sampler_stop(s);
    soak_router_stop(s);
    soak_report_broken(s);
    /* The self-test's logs are of no interest once it caught what it made. */
    bool caught = s->undeclared >= 0 && s->first_broken == I_FAILURES;
    soak_fleet_teardown(s, !caught);
    return exit_status(s, true);
}

/* The soak's own process holds a request and a subscriber socket to every
 * box, whose daemons it kills and restarts hundreds of times. NNG 1.5.2
 * (Debian 12) can leave a message it received, at the moment a pipe or a
 * timed-out request's context closed, in a queue that its close never
 * frees: a leak whose every frame is NNG's own. Beside a CPU hog one such
 * message (a 313-byte body) was left in a 75 s soak. The soak frees every
 * message it takes (soak_links.c), so in this process only NNG's own are
 * excused; the daemons it runs are other binaries and keep the suite's
 * suppressions, where only ev_publish's leak is excused. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libnng.so\n";
}

int main(int argc, char **argv)
{
    static soak run;
    soak *s = &run;
    setvbuf(stdout, NULL, _IOLBF, 0);
    int r = parse_args(s, argc, argv);
    if (r)
        return r;
    r = fl_check_can_run("soak");
    if (r)
        return r;
    /* AddressSanitizer keeps freed memory in a quarantine of 256 MiB by
     * default, so a daemon's RSS would grow through a run for that alone:
     * a small one makes the RSS baseline say something. The daemons and
     * apps inherit it. */
    const char *asan = getenv("ASAN_OPTIONS");
    char asan_options[512];
    snprintf(asan_options, sizeof(asan_options), "%s%squarantine_size_mb=4", asan ? asan : "",
             asan && asan[0] ? ":" : "");
    setenv("ASAN_OPTIONS", asan_options, 1);
    pthread_mutex_init(&s->broken_lock, NULL);
    pthread_mutex_init(&s->failures_lock, NULL);
    pthread_mutex_init(&s->history_lock, NULL);
    printf("soak: seed %" PRIu64 " (replay with --seed %" PRIu64 "), %zu boxes, %.0f s\n", s->seed,
           s->seed, s->n_boxes, (double)s->duration_ms / 1000.0);

    s->start_ms = soak_now_ms();
    if (soak_fleet_setup(s) < 0)
        return 1;
    printf("soak: %zu hosts on every box:", s->n_hosts);
    for (size_t i = 0; i < s->n_hosts; i++)
        printf(" %s (%s)", s->hosts[i].name, soak_host_kind_name(s->hosts[i].kind));
    printf("\n");
    soak_router_start(s);
    warm_up(s);
    soak_measure_baseline(s, false);

    s->start_ms = soak_now_ms();
    soak_sampler_start(s);
    soak_clients_start(s);
    uint64_t deadline = s->start_ms + s->duration_ms, next_lull = s->start_ms + LULL_EVERY_MS;
    unsigned lulls = 0;
    while (soak_now_ms() < deadline && !atomic_load(&s->broken)) {
        if (soak_now_ms() >= next_lull) {
            char when[32];
            snprintf(when, sizeof(when), "%u", ++lulls);
            soak_check_settled(s, when);
            next_lull = soak_now_ms() + LULL_EVERY_MS;
            continue;
        }
        dd_sleep_ms(200 + (long)soak_random_below(s, 1300));
        if (soak_now_ms() < deadline && !atomic_load(&s->broken))
            soak_fault_one(s);
    }
    if (atomic_load(&s->broken))
        return finish_broken(s);

    /* The faults stop: what holds at rest, then the baseline with the
     * clients quiet, then a clean stop of every daemon. */
    soak_check_settled(s, "final");
    soak_clients_stop(s);
    if (atomic_load(&s->broken))
        return finish_broken(s);
    soak_measure_baseline(s, true);
    /* SOAK_PAUSE_AT_END=N: N seconds to look at the parked fleet (lsof,
     * ss, the logs) before it stops. */
    const char *pause = getenv("SOAK_PAUSE_AT_END");
    if (pause && atoi(pause) > 0) {
        for (size_t b = 0; b < s->n_boxes; b++)
            fprintf(stderr, "soak: %s is pid %d\n", fl_box_name(b), (int)s->fleet.boxes[b].drv.pid);
        dd_sleep_ms(1000L * atoi(pause));
    }
    soak_sampler_stop(s);
    soak_router_stop(s);
    /* The soak's sockets go first, while the daemons still answer. */
    soak_links_close(s);
    soak_check_clean_stop(s);
    if (atomic_load(&s->broken)) {
        soak_report_broken(s);
        soak_fleet_teardown(s, true);
        return exit_status(s, true);
    }
    soak_report(s);
    soak_fleet_teardown(s, false);
    return exit_status(s, false);
}
