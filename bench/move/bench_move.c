/* bench-move: what a move costs a host's clients. Two real activatord boxes
 * on one real etcd share a checkpoint directory; one host (an echo server)
 * with a 50 MiB state directory is moved between them ROUNDS times while a
 * client thread asks both boxes for an answer, back to back. Per move:
 *   - serves nowhere: from the last answer of the box it leaves to the first
 *     answer of the box it lands on (the figure its clients see);
 *   - the whole move: from the CAS that starts it to the claim serving.
 * Baseline, measured by hand in the same run on the same directory: an
 * archive with its SHA-256 (checkpoint/'s writer), its verified extract
 * (checkpoint/'s restore), and a cold start of the host (a parked host's
 * first answer). It prints p50s and the ratio serves-nowhere / the sum of
 * the parts' p50s.
 *
 * bench-move registry: the same with no shared directory, the checkpoints
 * in a real registry (docker-registry on loopback, Checkpoints=docker://);
 * its parts by hand are the archive pushed, and the archive fetched by
 * digest and extracted (checkpoint/'s registry place), and the cold start. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/wake/bench_daemon.h"
#include "checkpoint/checkpoint.h"
#include "claims/claims.h"
#include "common/clock.h"
#include "tests/claims/etcd_harness.h"
#include "tests/image/registry_harness.h"

#define BENCH "bench-move"
#define HOST "web"
#define WARMUP 1
#define ROUNDS 10
#define STATE_FILES 50
#define STATE_FILE_SIZE (1024 * 1024)

static const char *const box_names[2] = {"box-1", "box-2"};

/* bench-move registry: where the checkpoints go, and the parts' place. */
static bool through_registry;
static reg_harness registry;
static ckpt_place by_hand_place;

typedef struct fleet {
    etcd_harness etcd;
    bool etcd_started;
    char url[256];
    char checkpoints[128];
    char addresses[2][64];
    dd_daemon boxes[2];
    claim_store *store;
    /* the client */
    pthread_t client;
    atomic_bool stop;
    atomic_uint_fast64_t last_ok[2];  /* CLOCK_MONOTONIC usec of each box's last answer */
    atomic_uint_fast64_t first_ok[2]; /* the first answer since armed[box] was set; 0: none */
    atomic_bool armed[2];
} fleet;

static void *client_run(void *arg)
{
    fleet *fl = arg;
    while (!atomic_load(&fl->stop)) {
        for (int i = 0; i < 2; i++) {
            act_error err = {0};
            if (bd_echo_once(fl->addresses[i], 500, &err) < 0)
                continue;
            uint64_t now = act_now_usec();
            atomic_store(&fl->last_ok[i], now);
            if (atomic_load(&fl->armed[i]) && !atomic_load(&fl->first_ok[i]))
                atomic_store(&fl->first_ok[i], now);
        }
        dd_sleep_ms(1);
    }
    return NULL;
}

/* 50 files of random bytes (they do not compress) in dir. */
static int fill_state(const char *dir, act_error *err)
{
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return act_error_set(err, errno, "mkdir %s: %s", dir, strerror(errno));
    char *block = malloc(STATE_FILE_SIZE);
    if (!block)
        return act_error_set(err, ENOMEM, "out of memory");
    int r = 0;
    for (int i = 0; i < STATE_FILES && r == 0; i++) {
        for (size_t done = 0; done < STATE_FILE_SIZE;) {
            ssize_t n = getrandom(block + done, STATE_FILE_SIZE - done, 0);
            if (n > 0)
                done += (size_t)n;
        }
        char path[512];
        snprintf(path, sizeof(path), "%s/data-%02d", dir, i);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, block, STATE_FILE_SIZE) != STATE_FILE_SIZE)
            r = act_error_set(err, errno, "writing %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
    }
    free(block);
    return r;
}

static int setup_box(fleet *fl, int i, int port, act_error *err)
{
    dd_daemon *d = &fl->boxes[i];
    char prefix[64], conf[256];
    snprintf(prefix, sizeof(prefix), "%s/act-bench-move", bd_base_dir());
    if (through_registry)
        snprintf(conf, sizeof(conf), "Checkpoints=docker://%s/checkpoints\nRegistryInsecure=%s\n",
                 registry.address, registry.address);
    else
        snprintf(conf, sizeof(conf), "Checkpoints=dir://%s\n", fl->checkpoints);
    dd_options options = {.dir_prefix = prefix,
                          .cgroup_name = "act-bench-move",
                          .box = box_names[i],
                          .store_url = fl->url,
                          .extra_conf = conf};
    snprintf(fl->addresses[i], sizeof(fl->addresses[i]), "127.0.0.%d:%d", i + 2, port);
    int r = dd_setup(d, &options, err);
    if (r < 0 ||
        (r = dd_write_host(d, HOST, err,
                           "[Host]\nExec=act-notify-echo\nIdleTimeoutSec=0\n"
                           "StopTimeoutSec=2\nReadyTimeoutSec=10\nProbeTimeoutSec=60\n"
                           "[Listen]\nListenStream=%s\n",
                           fl->addresses[i])) < 0 ||
        (r = dd_start(d, 30000, NULL, err)) < 0)
        return r;
    return dd_stage(d, HOST, "v1", ACT_NOTIFY_ECHO, true, err);
}

/* When the claim was first read in moving and in probing during the move
 * in flight (CLOCK_MONOTONIC usec; 0: not seen): where the time goes. */
static uint64_t seen_moving, seen_probing;

static int claim_serving_on(fleet *fl, int box, int timeout_ms, act_error *err)
{
    for (int waited = 0; waited < timeout_ms; waited += 2) {
        claim c = {0};
        int r = claims_read(fl->store, HOST, &c, err);
        if (r < 0)
            return r;
        if (r && !seen_moving && strcmp(c.op.phase, "moving") == 0)
            seen_moving = act_now_usec();
        if (r && !seen_probing && strcmp(c.op.phase, "probing") == 0)
            seen_probing = act_now_usec();
        if (r && c.op.kind == CLAIM_OP_SERVING && strcmp(c.op.phase, "serving") == 0 &&
            strcmp(c.holder.box, box_names[box]) == 0)
            return 0;
        dd_sleep_ms(2);
    }
    return act_error_set(err, ETIMEDOUT, "%s does not serve %s within %d ms", box_names[box], HOST,
                         timeout_ms);
}

static int one_move(fleet *fl, int round, bd_samples *nowhere, bd_samples *whole,
                    bd_samples *draining, bd_samples *probing, act_error *err)
{
    seen_moving = seen_probing = 0;
    int to = round % 2, from = 1 - to;
    claim current = {0}, next;
    int r = claims_read(fl->store, HOST, &current, err);
    if (r <= 0)
        return r < 0 ? r : act_error_set(err, ENOENT, "%s has no claim", HOST);
    char id[64];
    snprintf(id, sizeof(id), "bench-%d", round);
    if ((r = claim_move_start(HOST, &current, box_names[to], id, false, act_wallclock_usec(), &next,
                              err)) != 0)
        return r < 0 ? r : act_error_set(err, EALREADY, "a move is in flight");
    atomic_store(&fl->first_ok[to], 0);
    atomic_store(&fl->armed[to], true);
    uint64_t start = act_now_usec(), revision = 0;
    if ((r = claims_cas(fl->store, HOST, current.revision, &next, &revision, NULL, err)) < 0 ||
        (r = claim_serving_on(fl, to, 60000, err)) < 0)
        return r;
    uint64_t served = act_now_usec();
    for (int waited = 0; !atomic_load(&fl->first_ok[to]) && waited < 10000; waited++)
        dd_sleep_ms(1);
    atomic_store(&fl->armed[to], false);
    uint64_t first = atomic_load(&fl->first_ok[to]), last = atomic_load(&fl->last_ok[from]);
    if (!first)
        return act_error_set(err, ETIMEDOUT, "round %d: %s never answered", round, box_names[to]);
    if (nowhere) {
        bd_samples_add(nowhere, (double)(first - last));
        bd_samples_add(whole, (double)(served - start));
        if (seen_moving)
            bd_samples_add(draining, (double)(seen_moving - start));
        if (seen_probing)
            bd_samples_add(probing, (double)(served - seen_probing));
    }
    return 0;
}

/* The parts by hand, on the same state directory: archive + SHA-256,
 * verified extract, and a cold start of the host where it serves. */
static int parts_by_hand(fleet *fl, int serving, bd_samples *archive, bd_samples *extract,
                         bd_samples *cold, act_error *err)
{
    char state[256], scratch[256];
    snprintf(state, sizeof(state), "%s/hosts/%s/state", fl->boxes[serving].state_dir, HOST);
    snprintf(scratch, sizeof(scratch), "%s/by-hand", fl->boxes[serving].dir);
    for (int i = 0; i < ROUNDS; i++) {
        ckpt_info info = {0};
        atomic_bool cancel = false;
        uint64_t t0 = act_now_usec();
        int r = ckpt_place_write(&by_hand_place, "by-hand", state, 1, "bench", &cancel, &info, err);
        uint64_t t1 = act_now_usec();
        if (r < 0 || (r = ckpt_place_restore(&by_hand_place, "by-hand", info.id, info.sha256,
                                             scratch, 0, 0, err)) < 0)
            return r;
        uint64_t t2 = act_now_usec();
        bd_samples_add(archive, (double)(t1 - t0));
        bd_samples_add(extract, (double)(t2 - t1));
        /* A cold start: the host parked, then its first answer. */
        if ((r = dd_request(&fl->boxes[serving], 20000, NULL, err,
                            "{\"v\":1,\"op\":\"park\",\"host\":\"%s\"}", HOST)) < 0 ||
            (r = dd_wait_state(&fl->boxes[serving], HOST, "parked", 20000, 1, err)) < 0)
            return r;
        uint64_t t3 = act_now_usec();
        if ((r = bd_echo_once(fl->addresses[serving], 20000, err)) < 0)
            return r;
        bd_samples_add(cold, (double)(act_now_usec() - t3));
    }
    return 0;
}

static int run(fleet *fl, act_error *err)
{
    int r = etcd_harness_start(&fl->etcd, err);
    if (r < 0)
        return r;
    fl->etcd_started = true;
    snprintf(fl->url, sizeof(fl->url), "%s/bench-move-%d", fl->etcd.url_prefix, (int)getpid());
    snprintf(fl->checkpoints, sizeof(fl->checkpoints), "%s/act-bench-move-ckpt-%d", bd_base_dir(),
             (int)getpid());
    if (mkdir(fl->checkpoints, 0700) < 0)
        return act_error_set(err, errno, "mkdir %s: %s", fl->checkpoints, strerror(errno));
    char url[300];
    if (through_registry) {
        if ((r = reg_harness_start(&registry, false, false, err)) < 0)
            return r;
        snprintf(url, sizeof(url), "docker://%s/checkpoints", registry.address);
        char spool[300];
        snprintf(spool, sizeof(spool), "%s/spool", fl->checkpoints);
        char *insecure[] = {registry.address, NULL};
        if ((r = ckpt_place_parse(url, &by_hand_place, err)) < 0 ||
            (r = ckpt_place_set_registry(&by_hand_place, spool, NULL, insecure, err)) < 0)
            return r;
    } else {
        snprintf(url, sizeof(url), "dir://%s", fl->checkpoints);
        if ((r = ckpt_place_parse(url, &by_hand_place, err)) < 0)
            return r;
    }
    if ((r = claims_store_open(fl->url, NULL, &fl->store, err)) < 0)
        return r;
    int port = dd_free_port(err);
    if (port < 0)
        return port;
    for (int i = 0; i < 2; i++)
        if ((r = setup_box(fl, i, port, err)) < 0)
            return r;
    char state[256];
    snprintf(state, sizeof(state), "%s/hosts", fl->boxes[0].state_dir);
    mkdir(state, 0755);
    snprintf(state, sizeof(state), "%s/hosts/%s", fl->boxes[0].state_dir, HOST);
    mkdir(state, 0755);
    snprintf(state, sizeof(state), "%s/hosts/%s/state", fl->boxes[0].state_dir, HOST);
    if ((r = fill_state(state, err)) < 0)
        return r;
    claim assigned = {0};
    snprintf(assigned.host, sizeof(assigned.host), HOST);
    snprintf(assigned.op.id, sizeof(assigned.op.id), "assign");
    assigned.op.kind = CLAIM_OP_SERVING;
    snprintf(assigned.op.phase, sizeof(assigned.op.phase), "assigned");
    snprintf(assigned.op.exec, sizeof(assigned.op.exec), "%s", box_names[0]);
    uint64_t revision = 0;
    if ((r = claims_cas(fl->store, HOST, 0, &assigned, &revision, NULL, err)) < 0 ||
        (r = bd_echo_once(fl->addresses[0], 20000, err)) < 0 ||
        (r = claim_serving_on(fl, 0, 20000, err)) < 0)
        return r;
    if (pthread_create(&fl->client, NULL, client_run, fl) != 0)
        return act_error_set(err, EAGAIN, "cannot start the client thread");
    bd_samples nowhere = {0}, whole = {0}, archive = {0}, extract = {0}, cold = {0};
    bd_samples draining = {0}, probing = {0};
    for (int round = 1; round <= WARMUP + ROUNDS && r == 0; round++)
        r = one_move(fl, round, round > WARMUP ? &nowhere : NULL, &whole, &draining, &probing, err);
    atomic_store(&fl->stop, true);
    pthread_join(fl->client, NULL);
    fl->client = 0;
    int serving = (WARMUP + ROUNDS) % 2;
    if (r == 0)
        r = parts_by_hand(fl, serving, &archive, &extract, &cold, err);
    if (r == 0) {
        double parts = bd_samples_quantile(&archive, 0.5) + bd_samples_quantile(&extract, 0.5) +
                       bd_samples_quantile(&cold, 0.5);
        printf(BENCH ": %d moves of one host with a %d MiB state directory between two "
                     "activatord boxes on one etcd (state in %s; checkpoints %s)\n",
               ROUNDS, STATE_FILES * STATE_FILE_SIZE / (1024 * 1024), bd_base_dir(),
               through_registry ? "in a registry on loopback" : "in a shared directory");
        printf("  %-48s p50 %9.0f us  p99 %9.0f us\n", "serves nowhere (last answer -> first)",
               bd_samples_quantile(&nowhere, 0.5), bd_samples_quantile(&nowhere, 0.99));
        printf("  %-48s p50 %9.0f us\n", "the whole move (CAS -> claim serving)",
               bd_samples_quantile(&whole, 0.5));
        printf("  %-48s p50 %9.0f us\n", "  of which draining (CAS -> moving read)",
               bd_samples_quantile(&draining, 0.5));
        printf("  %-48s p50 %9.0f us\n", "  and probing (probing read -> serving)",
               bd_samples_quantile(&probing, 0.5));
        printf("  %-48s p50 %9.0f us\n",
               through_registry ? "by hand: archive + SHA-256 + push"
                                : "by hand: archive + SHA-256",
               bd_samples_quantile(&archive, 0.5));
        printf("  %-48s p50 %9.0f us\n",
               through_registry ? "by hand: fetch by digest + verified extract"
                                : "by hand: verified extract",
               bd_samples_quantile(&extract, 0.5));
        printf("  %-48s p50 %9.0f us\n", "by hand: cold start", bd_samples_quantile(&cold, 0.5));
        printf("  serves-nowhere / sum of parts p50 ratio %.2f (%+.0f us; target <= 1.3)\n",
               bd_samples_quantile(&nowhere, 0.5) / parts,
               bd_samples_quantile(&nowhere, 0.5) - parts);
    }
    bd_samples_free(&nowhere);
    bd_samples_free(&whole);
    bd_samples_free(&archive);
    bd_samples_free(&extract);
    bd_samples_free(&cold);
    bd_samples_free(&draining);
    bd_samples_free(&probing);
    return r;
}

int main(int argc, char **argv)
{
    through_registry = argc > 1 && strcmp(argv[1], "registry") == 0;
    if (through_registry && !reg_harness_available()) {
        printf(BENCH ": SKIPPED (docker-registry or skopeo not installed)\n");
        return 0;
    }
    int can = bd_check_can_run(BENCH);
    if (can != 0)
        return can;
    if (!etcd_harness_available()) {
        printf(BENCH ": SKIPPED (%s not installed)\n", ETCD_HARNESS_BINARY);
        return 0;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    static fleet fl;
    act_error err = {0};
    int r = run(&fl, &err);
    if (r < 0) {
        fprintf(stderr, BENCH ": %s\n", err.message);
        for (int i = 0; i < 2; i++)
            dd_dump_log(&fl.boxes[i]);
    }
    if (fl.client) {
        atomic_store(&fl.stop, true);
        pthread_join(fl.client, NULL);
    }
    claims_store_free(fl.store);
    for (int i = 0; i < 2; i++) {
        act_error cleanup = {0};
        if (dd_teardown(&fl.boxes[i], &cleanup) < 0) {
            fprintf(stderr, BENCH ": cleanup: %s\n", cleanup.message);
            r = r < 0 ? r : -EBUSY;
        }
    }
    if (fl.checkpoints[0]) {
        char command[300];
        snprintf(command, sizeof(command), "rm -rf %s", fl.checkpoints);
        if (system(command) != 0)
            fprintf(stderr, BENCH ": cannot remove %s\n", fl.checkpoints);
    }
    if (fl.etcd_started)
        etcd_harness_destroy(&fl.etcd);
    ckpt_place_clear(&by_hand_place);
    reg_harness_stop(&registry);
    return r < 0 ? 1 : 0;
}
