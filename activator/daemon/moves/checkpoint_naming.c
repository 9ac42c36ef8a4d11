#include "activator/daemon/moves/checkpoint_naming.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/cleanup.h"

/* Other writes on the claim meanwhile (a pin, a report) are read again and
 * the state written over them this many times. */
#define NAME_RETRIES 3

/* Linked in the daemon while its store call is out: a store freed with the
 * call in flight never answers it, and teardown frees what is left. */
typedef struct ad_checkpoint_naming {
    struct ad_checkpoint_naming *link_next, **link_prev;
    ad_host *host;
    claim_state written;
    uint64_t session;
    unsigned tries;
    claim next;
    ad_checkpoint_named_fn done;
    void *userdata;
} naming;

static void unlink_naming(naming *n)
{
    if (n->link_next)
        n->link_next->link_prev = n->link_prev;
    *n->link_prev = n->link_next;
}

static void finish(naming *n, int result, uint64_t revision, const char *code, const act_error *err)
{
    unlink_naming(n);
    _cleanup_free_ naming *done = n;
    done->done(done->host, result, revision, code, err, done->userdata);
}

static void name_on(naming *n, const claim *current);

static void on_named(claim_store *store, int result, uint64_t new_revision, const claim *current,
                     const act_error *err, void *userdata)
{
    naming *n = userdata;
    if (result == CLAIMS_CHANGED && n->tries++ < NAME_RETRIES) {
        name_on(n, current);
        return;
    }
    act_error why = {0};
    if (result == CLAIMS_CHANGED)
        act_error_set(&why, ESTALE,
                      "host %s: checkpoint %s was written but not named on the claim: the claim "
                      "kept changing",
                      n->host->name, n->written.checkpoint);
    else if (result < 0)
        act_error_set(&why, -result,
                      "host %s: checkpoint %s was written but not named on the claim: %s",
                      n->host->name, n->written.checkpoint, err->message);
    finish(n, result < 0 ? result : 0, new_revision,
           result == CLAIMS_CHANGED ? "claim_changed" : "store_error", &why);
}

static void name_on(naming *n, const claim *current)
{
    const char *box = n->host->daemon->config.box;
    act_error why = {0};
    if (!current || !current->revision || !claim_owned_by(current, box)) {
        act_error_set(&why, EPERM,
                      "host %s: checkpoint %s was written, but the claim no longer names box %s "
                      "as the one that runs the host (it names %s), so it was not named there",
                      n->host->name, n->written.checkpoint, box,
                      current && current->revision && claim_executor(current)[0]
                          ? claim_executor(current)
                          : "none");
        finish(n, -EPERM, 0, "not_owner", &why);
        return;
    }
    if (n->session && current->holder.session != n->session) {
        act_error_set(&why, EPERM,
                      "host %s: checkpoint %s was written of session %" PRIu64
                      ", but the claim names session %" PRIu64 " now, so it was not named there",
                      n->host->name, n->written.checkpoint, n->session, current->holder.session);
        finish(n, -EPERM, 0, "not_owner", &why);
        return;
    }
    n->next = *current;
    n->next.state = n->written;
    if (claims_cas_async(n->host->daemon->store, n->host->name, current->revision, &n->next,
                         on_named, n, &why) < 0)
        on_named(n->host->daemon->store, -EIO, 0, NULL, &why, n);
}

static void on_read(claim_store *store, int result, const claim *c, const act_error *err,
                    void *userdata)
{
    naming *n = userdata;
    if (result < 0) {
        on_named(store, result, 0, NULL, err, n);
        return;
    }
    name_on(n, result > 0 ? c : NULL);
}

int ad_checkpoint_name(ad_host *host, const claim_state *written, uint64_t session,
                       ad_checkpoint_named_fn done, void *userdata, act_error *err)
{
    naming *n = calloc(1, sizeof(*n));
    if (!n)
        return act_error_set(err, ENOMEM, "host %s: out of memory", host->name);
    *n = (naming){
        .host = host, .written = *written, .session = session, .done = done, .userdata = userdata};
    /* Linked before the call, so however it answers, finish finds it. */
    ad_daemon *daemon = host->daemon;
    n->link_prev = &daemon->namings;
    n->link_next = daemon->namings;
    if (n->link_next)
        n->link_next->link_prev = &n->link_next;
    daemon->namings = n;
    int r = claims_read_async(daemon->store, host->name, on_read, n, err);
    if (r < 0) {
        unlink_naming(n);
        free(n);
    }
    return r;
}

void ad_checkpoint_namings_free(ad_daemon *daemon)
{
    while (daemon->namings) {
        naming *n = daemon->namings;
        unlink_naming(n);
        free(n);
    }
}
