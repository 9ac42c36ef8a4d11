/* A pinned build fetched from its registry source (fetch/fetch.h). */
#include "activator/daemon/fetch/fetch.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activator/daemon/fetch/image_stage.h"
#include "activator/daemon/host/step_holds.h"
#include "claims/claims.h"
#include "common/cleanup.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/strv.h"

struct ad_fetch {
    ad_fetched_fn done; /* NULL once detached */
    void *userdata;
    ad_host *host; /* on the loop only */
    rel_store *releases;
    char host_name[ACT_NAME_MAX + 1];
    rel_pin pin;
    char source[CLAIM_SOURCE_SIZE];
    char executable[4096];
    char work_dir[4096];
    /* RegistryAuthFile= and RegistryInsecure= as the fetch began: a reload
     * may change the daemon's while it runs. */
    char registry_auth_file[4096];
    char **registry_insecure;
    uint64_t started_usec;
    bool found_staged; /* another fetch staged it first: nothing was pulled */
    int result;
    rel_identity identity;
    act_error err;
};

static void fetch_free(ad_fetch *fetch)
{
    if (!fetch)
        return;
    act_strv_free(fetch->registry_insecure);
    free(fetch);
}

static void fetch_freep(ad_fetch **fetch)
{
    fetch_free(*fetch);
}

static void run_fetch(void *data)
{
    ad_fetch *fetch = data;
    ad_test_hold_release_work("fetch", fetch->host_name);
    ad_image_stage in = {
        .host = fetch->host_name,
        .version = fetch->pin.version,
        .reference = fetch->source,
        .executable = fetch->executable,
        .work_dir = fetch->work_dir,
        .registry_auth_file = fetch->registry_auth_file,
        .registry_insecure = (const char *const *)fetch->registry_insecure,
        .expected_digest = fetch->pin.digest,
    };
    /* A fetch queued behind another of the same pin (a wake after one
     * that gave up waiting) finds the build staged: nothing to pull. */
    rel_resolved staged = {.exec_fd = -1};
    act_error ignored = {0};
    if (rel_resolve(fetch->releases, fetch->host_name, &fetch->pin, NULL, &staged, &ignored) == 0) {
        fetch->identity = staged.identity;
        rel_resolved_release(&staged);
        fetch->found_staged = true;
        fetch->result = 0;
        return;
    }
    /* A version staged with another digest is refused by the stage. */
    fetch->result = ad_image_stage_run(fetch->releases, &in, &fetch->identity, &fetch->err);
}

static void complete_fetch(void *data)
{
    ad_fetch *fetch = data;
    uint64_t took_ms = (act_now_usec() - fetch->started_usec) / 1000;
    if (fetch->result == 0)
        act_log_fields(
            LOG_NOTICE, &(act_log_ctx){.host = fetch->host_name, .build = fetch->pin.version},
            "host %s: %s version %s (build %s) from %s in %" PRIu64 " ms%s", fetch->host_name,
            fetch->found_staged ? "found staged, by a fetch before it," : "fetched",
            fetch->pin.version, fetch->pin.digest, fetch->source, took_ms,
            fetch->done ? "" : "; the wake that asked for it had ended");
    else
        act_log_fields(LOG_WARNING, &(act_log_ctx){.host = fetch->host_name},
                       "host %s: cannot fetch version %s from %s: %s", fetch->host_name,
                       fetch->pin.version, fetch->source, fetch->err.message);
    if (fetch->done)
        fetch->done(fetch->host, fetch->result, &fetch->err, fetch->userdata);
    fetch_free(fetch);
}

/* The daemon stopped with the fetch queued or running. */
static void drop_fetch(void *data)
{
    ad_fetch *fetch = data;
    if (fetch->done) {
        act_error err = {0};
        act_error_set(&err, ECANCELED, "host %s: the box is stopping; the fetch of %s ended",
                      fetch->host_name, fetch->pin.version);
        fetch->done(NULL, -ECANCELED, &err, fetch->userdata);
    }
    fetch_free(fetch);
}

int ad_fetch_start(ad_host *host, const rel_pin *pin, const char *source, ad_fetched_fn done,
                   void *userdata, ad_fetch **out, act_error *err)
{
    assert(host && pin && source && done && out);
    ad_daemon *daemon = host->daemon;
    __attribute__((cleanup(fetch_freep))) ad_fetch *fetch = calloc(1, sizeof(*fetch));
    if (!fetch)
        return act_error_set(err, ENOMEM, "host %s: out of memory", host->name);
    fetch->done = done;
    fetch->userdata = userdata;
    fetch->host = host;
    fetch->releases = daemon->releases;
    fetch->started_usec = act_now_usec();
    fetch->pin = *pin;
    snprintf(fetch->host_name, sizeof(fetch->host_name), "%s", host->name);
    snprintf(fetch->source, sizeof(fetch->source), "%s", source);
    snprintf(fetch->executable, sizeof(fetch->executable), "%s",
             ad_host_config(host)->exec_argv[0]);
    snprintf(fetch->work_dir, sizeof(fetch->work_dir), "%s", daemon->config.state_directory);
    snprintf(fetch->registry_auth_file, sizeof(fetch->registry_auth_file), "%s",
             daemon->config.registry_auth_file ? daemon->config.registry_auth_file : "");
    fetch->registry_insecure = act_strv_copy(daemon->config.registry_insecure);
    if (daemon->config.registry_insecure && !fetch->registry_insecure)
        return act_error_set(err, ENOMEM, "host %s: out of memory", host->name);
    int r = act_offload_submit_droppable(daemon->release_work, act_offload_lane(host->name),
                                         run_fetch, complete_fetch, drop_fetch, fetch, err);
    if (r < 0)
        return r;
    act_log_fields(LOG_NOTICE, &(act_log_ctx){.host = host->name, .build = pin->version},
                   "host %s: version %s is pinned but not staged here; fetching it from %s",
                   host->name, pin->version, source);
    *out = TAKE_PTR(fetch); /* complete_fetch's now */
    return 0;
}

void ad_fetch_detach(ad_fetch *fetch)
{
    if (fetch)
        fetch->done = NULL;
}
