/* A pinned build that a box has not staged, fetched from the registry
 * source its pin names, with two real daemons on one dir store that share
 * no release directory, and a real registry (docker-registry, fed by
 * skopeo):
 *   - box A stages v2 from the registry and swaps to it: the claim's pin
 *     names the image by digest; the host is assigned to box B, which has
 *     only v1;
 *   - B's wake fetches v2 while its fetch is held on the release worker
 *     (ACTIVATOR_TEST_RELEASE_HOLD): with BuildFetchTimeoutSec=1s the wake
 *     is refused build_unavailable, saying so, and the fetch goes on; once
 *     it is let go and done, the next wake runs v2 without fetching again;
 *   - a hold made through box A, which has v2 from the registry, names the
 *     build (held_digest, held_source); with no pin, box B runs exactly the
 *     held build although its live version is v1, and having lost v2, B
 *     fetches it from the hold's source, before it admits itself;
 *   - pins B cannot run are refused build_unavailable with nothing staged:
 *     a pin whose source makes a build of another digest, a pin with no
 *     source (a build staged from a directory), and a pin whose image was
 *     changed in the registry's storage. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "tests/image/registry_harness.h"

#define SECOND_BOX "box-b"

typedef struct fetch_fixture {
    dh_daemon first, second;
    reg_harness registry;
    char hold[PATH_MAX]; /* box B's release work waits for it */
} fetch_fixture;

static int setup(void **state)
{
    *state = calloc(1, sizeof(fetch_fixture));
    return *state ? 0 : -1;
}

static int teardown(void **state)
{
    fetch_fixture *fx = *state;
    /* A daemon stops once its release work is done: let it go. */
    if (fx->hold[0])
        close(open(fx->hold, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    /* The second first: the first one's teardown removes the store. */
    int r = dh_teardown(&fx->second);
    r |= dh_teardown(&fx->first);
    reg_harness_stop(&fx->registry);
    free(fx);
    return r;
}

static void touch(dh_daemon *d, const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    DH_CHECK(d, fd >= 0, "cannot create %s: %s", path, strerror(errno));
    close(fd);
}

static bool version_staged(dh_daemon *d, const char *version)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/releases/demo/%s", d->drv.state_dir, version);
    return access(path, F_OK) == 0;
}

static void request_ok(dh_daemon *d, const char *what, json_object *reply)
{
    DH_CHECK(d, dh_reply_ok(reply), "%s: %s", what, json_object_to_json_string(reply));
    json_object_put(reply);
}

/* A wake of demo on d is refused build_unavailable with a message holding
 * words, and leaves version unstaged. */
static void wake_refused(dh_daemon *d, const char *words, const char *version)
{
    json_object *reply = dh_wake_reply(d, "demo", 30000);
    const char *text = json_object_to_json_string(reply);
    DH_CHECK(d,
             !dh_reply_ok(reply) && strcmp(dh_reply_code(reply), "build_unavailable") == 0 &&
                 strstr(text, words),
             "a wake of a pin this box cannot have (%s) was not refused build_unavailable: %s",
             words, text);
    json_object_put(reply);
    DH_CHECK(d, !version_staged(d, version), "the refused fetch left version %s staged",
             version);
}

/* Writes demo's pin, B's to run, with demo parked on B. */
static void pin_demo(dh_daemon *d, const char *version, const char *digest, const char *source)
{
    claim c;
    DH_CHECK(d, dh_claim_get(d, "demo", &c), "demo has no claim");
    c.has_pin = true;
    c.pin = (claim_pin){0};
    snprintf(c.pin.version, sizeof(c.pin.version), "%s", version);
    snprintf(c.pin.digest, sizeof(c.pin.digest), "%s", digest);
    snprintf(c.pin.source, sizeof(c.pin.source), "%s", source);
    dh_claim_put(d, &c);
}

/* A wake of demo on d fetches v2 (the build what names) and serves it. The
 * fetch may outlast BuildFetchTimeoutSec=1s on a slow machine: the wake is
 * then refused saying so, the fetch goes on, and a wake once it is done
 * serves v2. */
static void wake_fetching_v2(dh_daemon *d, int port, const char *what)
{
    size_t fetches = dh_log_count(d, "fetched version v2");
    json_object *reply = dh_wake_reply(d, "demo", 60000);
    if (!dh_reply_ok(reply)) {
        const char *text = json_object_to_json_string(reply);
        DH_CHECK(d, strcmp(dh_reply_code(reply), "build_unavailable") == 0 && strstr(text, what),
                 "the wake of the %s answered %s", what, text);
        dh_waiting_for("the fetch of the %s", what);
        for (int i = 0; i < 600 && dh_log_count(d, "fetched version v2") == fetches; i++)
            usleep(100 * 1000);
    }
    json_object_put(reply);
    dh_expect_version(d, port, "v2");
}

/* Box A let demo go to box B (or B holds it already: its watch wakes a
 * host on the release). */
static bool released_to_second(const claim *c)
{
    return c->holder.released_usec || strcmp(c->holder.box, SECOND_BOX) == 0;
}

static void test_a_pinned_build_is_fetched_from_its_source(void **state)
{
    fetch_fixture *fx = *state;
    dh_daemon *first = &fx->first, *second = &fx->second;
    if (!reg_harness_available() || system("command -v umoci >/dev/null") != 0)
        skip(); /* scripts/install-deps.sh installs them */
    act_error err = {0};
    DH_CHECK(first, reg_harness_start(&fx->registry, false, false, &err) == 0, "registry: %s",
             err.message);
    char conf[256];
    snprintf(conf, sizeof(conf), "RegistryInsecure=%s\nBuildFetchTimeoutSec=1s\n",
             fx->registry.address);
    dh_setup(first, DH_STORE_DIR, conf);
    dh_add_app_host(first, "demo", NULL, NULL);
    dh_setup_beside(second, first, SECOND_BOX, conf);
    int second_port = dh_add_app_host(second, "demo", NULL, NULL);
    dh_make_image_layout(first);
    char layout[PATH_MAX];
    snprintf(layout, sizeof(layout), "%s/img", first->drv.dir);
    DH_CHECK(first, reg_harness_push(&fx->registry, layout, "v1", "demo/app", &err) == 0,
             "push: %s", err.message);
    claim assigned;
    dh_claim_assigned("demo", DH_BOX, &assigned);
    dh_claim_put(first, &assigned);
    char *hold = fx->hold;
    dh_hold_path(second, "fetch-go", hold, sizeof(fx->hold));
    char env[PATH_MAX + 64];
    snprintf(env, sizeof(env), "ACTIVATOR_TEST_RELEASE_HOLD=%s", hold);
    const char *const second_env[] = {env, NULL};
    dh_start(first, NULL);
    dh_start(second, second_env);

    dh_step("box A stages v2 from the registry and swaps demo to it");
    dh_wake(first, "demo");
    json_object *reply = dh_request(first, 60000,
                                    "{\"v\":1,\"op\":\"stage\",\"host\":\"demo\",\"version\":"
                                    "\"v2\",\"path\":\"docker://%s/demo/app:v1\"}",
                                    fx->registry.address);
    DH_CHECK(first, dh_reply_ok(reply), "stage: %s", json_object_to_json_string(reply));
    char source[CLAIM_SOURCE_SIZE], digest[65];
    snprintf(source, sizeof(source), "%s", dh_json_str(dh_reply_result(reply), "source"));
    snprintf(digest, sizeof(digest), "%s", dh_json_str(dh_reply_result(reply), "digest"));
    json_object_put(reply);
    request_ok(first, "swap demo v2",
               dh_request(first, 60000,
                          "{\"v\":1,\"op\":\"swap\",\"host\":\"demo\",\"version\":\"v2\"}"));
    claim c;
    DH_CHECK(first,
             dh_claim_get(first, "demo", &c) && c.has_pin && strcmp(c.pin.version, "v2") == 0 &&
                 strcmp(c.pin.digest, digest) == 0 && strcmp(c.pin.source, source) == 0 &&
                 strstr(source, "@sha256:"),
             "the swap's pin is %s %s from \"%s\", not v2 %s from %s", c.pin.version,
             c.pin.digest, c.pin.source, digest, source);

    dh_step("demo is assigned to box B, which has only v1");
    request_ok(first, "claim.assign demo box-b",
               dh_request(first, 30000,
                          "{\"v\":1,\"op\":\"claim.assign\",\"host\":\"demo\",\"box\":\"%s\"}",
                          SECOND_BOX));
    DH_CHECK(first, dh_wait_state(first, "demo", "parked", 15000),
             "box A did not retire demo once it was assigned to box B");
    DH_CHECK(first, dh_claim_wait(first, "demo", released_to_second, 15000, &c),
             "box A did not release demo's claim to box B");
    DH_CHECK(second, !version_staged(second, "v2"), "box B had v2 before any fetch");

    dh_step("box B's wake fetches v2: held past BuildFetchTimeoutSec=1s, it is refused");
    wake_refused(second, "BuildFetchTimeoutSec", "v2");
    DH_CHECK(second, dh_log_wait(second, "release work fetch of host demo held", 5000),
             "the fetch never reached the release worker");
    touch(second, hold);
    DH_CHECK(second, dh_log_wait(second, "fetched version v2", 60000),
             "the fetch that outlasted its wake did not finish");
    /* B's watch may have woken demo on the release too: each wake that
     * found v2 missing fetched it; the one that finds it staged does not. */
    char command[PATH_MAX * 2];
    size_t fetches = dh_log_count(second, "fetching it from");
    dh_served served = dh_wake(second, "demo");
    dh_expect_version(second, second_port, "v2");
    DH_CHECK(second, dh_log_count(second, "fetching it from") == fetches,
             "box B fetched v2 again although it was staged");
    DH_CHECK(second, dh_claim_get(second, "demo", &c) && strcmp(c.holder.box, SECOND_BOX) == 0 &&
                         c.holder.generation == served.generation,
             "the claim does not name box B's generation %" PRIu64, served.generation);

    dh_step("a hold names its build; box B, without it, fetches it and runs it");
    dh_park(second, "demo");
    request_ok(second, "unpin demo",
               dh_request(second, 30000, "{\"v\":1,\"op\":\"unpin\",\"host\":\"demo\"}"));
    request_ok(
        first, "hold demo v2",
        dh_request(first, 30000, "{\"v\":1,\"op\":\"hold\",\"host\":\"demo\",\"version\":\"v2\"}"));
    DH_CHECK(first,
             dh_claim_get(first, "demo", &c) && strcmp(c.held, "v2") == 0 &&
                 strcmp(c.held_digest, digest) == 0 && strcmp(c.held_source, source) == 0,
             "the hold names %s %s from \"%s\", not v2 %s from %s", c.held, c.held_digest,
             c.held_source, digest, source);
    snprintf(command, sizeof(command), "rm -rf %s/releases/demo/v2", second->drv.state_dir);
    DH_CHECK(second, system(command) == 0 && !version_staged(second, "v2"),
             "cannot remove box B's v2");
    wake_fetching_v2(second, second_port, "held build v2");
    request_ok(second, "unhold demo",
               dh_request(second, 30000, "{\"v\":1,\"op\":\"unhold\",\"host\":\"demo\"}"));

    dh_step("a failed pin's fallback from the registry is fetched by a box without it");
    /* B serves v2 from the registry: its swap to a crashing v8 fails, and
     * the pin names v2 as the fallback, with where to fetch it. */
    dh_stage_file(second, "demo", "v8", "/bin/false", false, NULL);
    reply =
        dh_request(second, 60000, "{\"v\":1,\"op\":\"swap\",\"host\":\"demo\",\"version\":\"v8\"}");
    DH_CHECK(second, !dh_reply_ok(reply), "a swap to a crashing build served: %s",
             json_object_to_json_string(reply));
    json_object_put(reply);
    DH_CHECK(second,
             dh_claim_get(second, "demo", &c) && claim_pin_failed(&c) &&
                 strcmp(c.pin.fallback_version, "v2") == 0 &&
                 strcmp(c.pin.fallback_digest, digest) == 0 &&
                 strcmp(c.pin.fallback_source, source) == 0,
             "the failed pin's fallback is %s %s from \"%s\", not v2 %s from %s",
             c.pin.fallback_version, c.pin.fallback_digest, c.pin.fallback_source, digest, source);
    dh_park(second, "demo");
    DH_CHECK(second, dh_wait_state(second, "demo", "parked", 10000), "demo did not park");
    DH_CHECK(second, system(command) == 0 && !version_staged(second, "v2"),
             "cannot remove box B's v2");
    wake_fetching_v2(second, second_port, "fallback build v2");

    dh_step("pins box B cannot run are refused, with nothing staged");
    dh_park(second, "demo");
    pin_demo(second, "v5", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
             source);
    wake_refused(second, "not 0123456789abcdef", "v5");
    pin_demo(second, "v4", digest, "");
    wake_refused(second, "names no source", "v4");
    snprintf(command, sizeof(command),
             "for f in $(find %s/docker/registry/v2/blobs -name data -size +1k); do "
             "printf 'X' | dd of=\"$f\" bs=1 seek=5 conv=notrunc 2>/dev/null; done",
             fx->registry.storage);
    DH_CHECK(second, system(command) == 0, "cannot change the registry's blobs");
    pin_demo(second, "v3", digest, source);
    wake_refused(second, "changed or damaged", "v3");

    dh_stop_and_check_clean(second);
    dh_stop_and_check_clean(first);
}

int main(void)
{
    int skip = dh_check_can_run("daemon-fetch", DH_STORE_DIR);
    if (skip)
        return skip;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_pinned_build_is_fetched_from_its_source, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
