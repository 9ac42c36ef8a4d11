/* See store_fixture.h. */
#include "store_fixture.h"

#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "claims/claim_slots.h"
#include "claims/etcd_wire.h"
#include "common/clock.h"

int store_fixture_setup(store_fixture *f, const char *backend)
{
    memset(f, 0, sizeof(*f));
    f->etcd = strcmp(backend, "etcd") == 0;
    if (f->etcd) {
        if (!etcd_harness_available()) {
            printf("SKIP: %s is not installed (Debian package etcd-server)\n",
                   ETCD_HARNESS_BINARY);
            return 77;
        }
        act_error err = {0};
        if (etcd_harness_start(&f->harness, &err) < 0) {
            fprintf(stderr, "cannot start etcd: %s\n", err.message);
            return 1;
        }
        return 0;
    }
    snprintf(f->root, sizeof(f->root), "/tmp/act-claims-XXXXXX");
    if (!mkdtemp(f->root)) {
        perror("mkdtemp");
        return 1;
    }
    return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

void store_fixture_teardown(store_fixture *f)
{
    if (f->etcd)
        etcd_harness_destroy(&f->harness);
    else if (f->root[0])
        nftw(f->root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void store_fixture_fresh_url(store_fixture *f, char *url, size_t size)
{
    f->counter++;
    if (f->etcd)
        snprintf(url, size, "%s/t%u", f->harness.url_prefix, f->counter);
    else
        snprintf(url, size, "dir://%s/t%u", f->root, f->counter);
}

claim_store *store_fixture_open_fresh(store_fixture *f, char *url, size_t size)
{
    store_fixture_fresh_url(f, url, size);
    claim_store *store = NULL;
    act_error err = {0};
    claims_store_options options = {.timeout_ms = 5000};
    if (claims_store_open(url, &options, &store, &err) < 0) {
        fprintf(stderr, "open %s: %s\n", url, err.message);
        abort();
    }
    return store;
}

void store_fixture_plant(store_fixture *f, const char *url, const char *host, const char *text,
                         size_t len)
{
    if (!f->etcd) {
        /* A claim file whose newest slot holds text at revision 3; text too
         * large for any slot is the whole file. */
        char path[512];
        snprintf(path, sizeof(path), "%s/%s.claim", url + strlen("dir://"), host);
        size_t slot_size = claim_slots_size_for(len);
        void *image = NULL;
        if (len + CLAIM_SLOT_HEADER <= slot_size) {
            image = calloc(2, slot_size);
            claim_slots_encode(image, slot_size, 0, 3, false, text, len);
            text = image;
            len = 2 * slot_size;
        }
        FILE *out = fopen(path, "w");
        bool written = out && fwrite(text, 1, len, out) == len;
        free(image);
        if (!out || !written || fclose(out) != 0) {
            fprintf(stderr, "cannot plant %s\n", path);
            abort();
        }
        return;
    }
    const char *prefix = strchr(url + strlen("etcd://"), '/');
    char key[256];
    snprintf(key, sizeof(key), "%s/%s", prefix, host);
    char *key64 = etcd_b64_encode(key, strlen(key));
    char *value64 = etcd_b64_encode(text, len);
    char *body;
    if (asprintf(&body, "{\"key\":\"%s\",\"value\":\"%s\"}", key64, value64) < 0)
        abort();
    long status = etcd_harness_post(&f->harness, "/v3/kv/put", body, NULL, NULL);
    if (status != 200) {
        fprintf(stderr, "cannot plant %s in etcd: HTTP %ld\n", key, status);
        abort();
    }
    free(body);
    free(key64);
    free(value64);
}

claim_store *fixture_open_on_loop(store_fixture *f, char *url, size_t size,
                                  const claims_store_options *options, sd_event **event)
{
    store_fixture_fresh_url(f, url, size);
    claim_store *store = NULL;
    act_error err = {0};
    if (claims_store_open(url, options, &store, &err) < 0 || sd_event_new(event) < 0 ||
        claims_store_attach_event(store, *event, &err) < 0) {
        fprintf(stderr, "cannot open %s on a loop: %s\n", url, err.message);
        abort();
    }
    return store;
}

void fixture_close_on_loop(claim_store *store, sd_event *event)
{
    claims_store_free(store);
    sd_event_unref(event);
}

void fixture_seen_on_watch(claims_watch *watch, const claim_change *change, int error,
                           const act_error *err, void *userdata)
{
    fixture_seen *seen = userdata;
    if (error < 0) {
        seen->error = error;
        snprintf(seen->message, sizeof(seen->message), "%s", err->message);
    } else if (seen->n < sizeof(seen->changes) / sizeof(seen->changes[0])) {
        seen->changes[seen->n++] = *change;
    }
}

claims_watch *fixture_seen_start(claim_store *store, uint64_t from_revision, fixture_seen *seen)
{
    claims_watch *watch = NULL;
    act_error err = {0};
    if (claims_watch_start(store, from_revision, fixture_seen_on_watch, seen, &watch, &err) < 0) {
        fprintf(stderr, "cannot start a watch from revision %" PRIu64 ": %s\n", from_revision,
                err.message);
        abort();
    }
    return watch;
}

void fixture_seen_run(sd_event *event, fixture_seen *seen, size_t n, int timeout_ms)
{
    uint64_t end = act_now_usec() + (uint64_t)timeout_ms * 1000;
    while ((n == 0 || seen->n < n) && seen->error == 0 && act_now_usec() < end) {
        if (sd_event_run(event, 10 * 1000) < 0) {
            fprintf(stderr, "the watch's loop failed\n");
            abort();
        }
    }
}

claim fixture_claim(const char *host, uint64_t session)
{
    claim c = {0};
    snprintf(c.host, sizeof(c.host), "%s", host);
    snprintf(c.holder.box, sizeof(c.holder.box), "b1");
    snprintf(c.holder.incarnation, sizeof(c.holder.incarnation), "inc-1");
    c.holder.session = session;
    c.holder.generation = session;
    c.holder.stamp_usec = 1700000000000000ULL + session;
    snprintf(c.op.id, sizeof(c.op.id), "op-1");
    c.op.kind = CLAIM_OP_SERVING;
    snprintf(c.op.phase, sizeof(c.op.phase), "serving");
    snprintf(c.op.exec, sizeof(c.op.exec), "b1");
    return c;
}
