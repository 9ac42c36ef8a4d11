#include "activator/daemon/claim/release.h"

#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>

#include "activator/daemon/claim/write_backs.h"
#include "common/clock.h"
#include "common/log.h"

/* A write of anything else on the claim meanwhile (a pin, a hold) is read
 * again and the release tried over it this many times. */
#define RELEASE_RETRIES 3

typedef struct ad_release {
    ad_host *host;
    unsigned tries;
    claim written;
} release;

static void finish(release *rel)
{
    rel->host->release = NULL;
    free(rel);
}

static void write_release(release *rel, const claim *current);

static void on_read(claim_store *store, int result, const claim *c, const act_error *err,
                    void *userdata)
{
    release *rel = userdata;
    if (result < 0) {
        act_log_fields(LOG_WARNING, &(act_log_ctx){.host = rel->host->name},
                       "host %s: cannot read its claim to release it: %s", rel->host->name,
                       err->message);
        finish(rel);
        return;
    }
    if (result == 0) {
        finish(rel);
        return;
    }
    write_release(rel, c);
}

static void read_again(release *rel)
{
    act_error err = {0};
    if (claims_read_async(rel->host->daemon->store, rel->host->name, on_read, rel, &err) < 0) {
        act_log_fields(LOG_WARNING, &(act_log_ctx){.host = rel->host->name},
                       "host %s: cannot read its claim to release it: %s", rel->host->name,
                       err.message);
        finish(rel);
    }
}

static void on_written(claim_store *store, int result, uint64_t new_revision,
                       const claim *current, const act_error *err, void *userdata)
{
    release *rel = userdata;
    const char *name = rel->host->name;
    if (result == 0) {
        act_log_fields(LOG_INFO, &(act_log_ctx){.host = name},
                       "host %s: released to box %s (revision %" PRIu64 "): nothing of it runs "
                       "here",
                       name, claim_executor(&rel->written), new_revision);
        finish(rel);
        return;
    }
    if (result == CLAIMS_CHANGED && rel->tries++ < RELEASE_RETRIES) {
        write_release(rel, current);
        return;
    }
    if (result != CLAIMS_CHANGED)
        act_log_fields(LOG_WARNING, &(act_log_ctx){.host = name},
                       "host %s: cannot release its claim: %s", name, err->message);
    finish(rel);
}

/* Writes the release over current, if it is still due and nothing runs. */
static void write_release(release *rel, const claim *current)
{
    ad_host *host = rel->host;
    if (!current->revision || !claim_release_due(current, host->daemon->config.box) ||
        !ad_host_at_rest(host) || host->daemon->stopping) {
        finish(rel);
        return;
    }
    claim_next_released(current, act_wallclock_usec(), &rel->written);
    act_error err = {0};
    if (claims_cas_async(host->daemon->store, host->name, current->revision, &rel->written,
                         on_written, rel, &err) < 0) {
        act_log_fields(LOG_WARNING, &(act_log_ctx){.host = host->name},
                       "host %s: cannot release its claim: %s", host->name, err.message);
        finish(rel);
    }
}

static void start_after_reports(void *userdata)
{
    read_again(userdata);
}

void ad_claim_release_free(ad_host *host)
{
    /* Its store call, or its wait for the write-backs, was dropped with
     * the store (claims_store_free calls no callback). */
    free(host->release);
    host->release = NULL;
}

void ad_claim_release(ad_host *host, const claim *current)
{
    assert(host);
    ad_daemon *daemon = host->daemon;
    if (daemon->stopping || host->release || !ad_host_at_rest(host) ||
        (current && (!current->revision || !claim_release_due(current, daemon->config.box))))
        return;
    release *rel = calloc(1, sizeof(*rel));
    if (!rel) {
        act_log(LOG_WARNING, "host %s: out of memory releasing its claim", host->name);
        return;
    }
    rel->host = host;
    host->release = rel;
    /* The write-back of the park that stopped the host goes first. */
    if (!ad_claim_report_defer(host, start_after_reports, rel))
        read_again(rel);
}
