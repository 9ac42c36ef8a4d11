/* Box records on the dir store: <dir>/.boxes/<box>.json, each rewritten by
 * its daemon with the time its lease runs out. The claim listing reads only
 * "<host>.json" in <dir> and the watch only the journal, so neither meets a
 * record. A record is rewritten whole (temp + rename) under the store's
 * lock, so a reader never sees half of one. An operator's drain mark is
 * <dir>/.drain/<box>.json, beside the records and never expiring. */
#include <assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "claims/store_dir.h"
#include "common/cleanup.h"
#include "common/clock.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/names.h"

/* Opens <dir>/NAME (.boxes, .drain), made when create says so. Returns the
 * fd, -ENOENT when it is absent and not to be made, or another negative
 * errno. */
static int open_subdir(dir_store *ds, const char *name, bool create, act_error *err)
{
    if (create && mkdirat(ds->dirfd, name, 0755) < 0 && errno != EEXIST)
        return act_error_set(err, errno, "claim store %s: cannot make %s: %m", ds->path, name);
    int fd = openat(ds->dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && (create || errno != ENOENT))
        return act_error_set(err, errno, "claim store %s: cannot open %s: %m", ds->path, name);
    return fd < 0 ? -ENOENT : fd;
}

static int open_boxes(dir_store *ds, bool create, act_error *err)
{
    return open_subdir(ds, DIR_BOXES_DIR, create, err);
}

/* Reads <dir>/<subdir>/<box>.json: 1 with *text (malloc'd) and *len, 0
 * when there is none. */
static int read_box_file(dir_store *ds, int fd, const char *subdir, const char *box, char **text,
                         size_t *len, act_error *err)
{
    char name[ACT_NAME_MAX + 8];
    snprintf(name, sizeof(name), "%s.json", box);
    act_error why = {0};
    int r = act_read_file(fd, name, CLAIMS_BOX_JSON_MAX, text, len, &why);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return act_error_set(err, -r, "box %s: cannot read %s/%s/%s: %s", box, ds->path, subdir,
                             name, why.message);
    return 1;
}

/* Reads box's record: 1 with *out (live judged now), 0 when there is none. */
static int read_record(dir_store *ds, int boxes_fd, const char *box, claims_box *out,
                       act_error *err)
{
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = read_box_file(ds, boxes_fd, DIR_BOXES_DIR, box, &text, &len, err);
    if (r <= 0)
        return r;
    if ((r = claims_box_from_json(box, text, len, out, err)) < 0)
        return act_error_prefix(err, "%s/%s/%s.json", ds->path, DIR_BOXES_DIR, box);
    out->live = out->expires_usec > act_wallclock_usec();
    return 1;
}

static int write_record(dir_store *ds, int boxes_fd, const claims_box *record, claims_box *out,
                        act_error *err)
{
    *out = *record;
    out->lease_id = 0;
    out->live = true;
    out->refreshed_usec = act_wallclock_usec();
    out->expires_usec = out->refreshed_usec + record->lease_ttl_usec;
    _cleanup_free_ char *text = claims_box_to_json(out, true);
    if (!text)
        return act_error_set(err, ENOMEM, "box %s: out of memory", record->box);
    char name[ACT_NAME_MAX + 8];
    snprintf(name, sizeof(name), "%s.json", record->box);
    act_error why = {0};
    int r = act_write_atomic(boxes_fd, name, text, strlen(text), 0644, &why);
    if (r < 0)
        return act_error_set(err, -r, "box %s: cannot write its record in %s/%s: %s",
                             record->box, ds->path, DIR_BOXES_DIR, why.message);
    return 0;
}

/* Whether the record there now is still the lease record renews: there,
 * of the same daemon start, not expired. CLAIMS_LEASE_LOST saying why not. */
static int check_still_ours(dir_store *ds, int boxes_fd, const claims_box *record,
                            act_error *err)
{
    claims_box current;
    int r = read_record(ds, boxes_fd, record->box, &current, err);
    if (r < 0)
        return r;
    if (r == 0)
        return act_error_set(err, -CLAIMS_LEASE_LOST, "box %s: its record in %s/%s is gone",
                             record->box, ds->path, DIR_BOXES_DIR);
    if (strcmp(current.incarnation, record->incarnation) != 0)
        return act_error_set(err, -CLAIMS_LEASE_LOST,
                             "box %s: its record in %s/%s now names incarnation %s", record->box,
                             ds->path, DIR_BOXES_DIR, current.incarnation);
    if (!current.live)
        return act_error_set(err, -CLAIMS_LEASE_LOST,
                             "box %s: its lease in %s/%s ran out %llu ms ago", record->box,
                             ds->path, DIR_BOXES_DIR,
                             (unsigned long long)(act_wallclock_usec() - current.expires_usec) /
                                 1000);
    return 0;
}

static int remove_record(dir_store *ds, int boxes_fd, const claims_box *record, act_error *err)
{
    claims_box current;
    int r = read_record(ds, boxes_fd, record->box, &current, err);
    /* Another start's record is that start's to remove. */
    if (r <= 0 || strcmp(current.incarnation, record->incarnation) != 0)
        return r < 0 ? r : 0;
    char name[ACT_NAME_MAX + 8];
    snprintf(name, sizeof(name), "%s.json", record->box);
    if (unlinkat(boxes_fd, name, 0) < 0 && errno != ENOENT)
        return act_error_set(err, errno, "box %s: cannot remove its record in %s/%s: %m",
                             record->box, ds->path, DIR_BOXES_DIR);
    return 0;
}

/* Reads box's drain mark: 1 with *drained_usec, 0 when there is none. */
static int read_drain(dir_store *ds, int drain_fd, const char *box, uint64_t *drained_usec,
                      act_error *err)
{
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = read_box_file(ds, drain_fd, DIR_DRAIN_DIR, box, &text, &len, err);
    if (r <= 0)
        return r;
    if ((r = claims_drain_from_json(box, text, len, drained_usec, err)) < 0)
        return act_error_prefix(err, "%s/%s/%s.json", ds->path, DIR_DRAIN_DIR, box);
    return 1;
}

/* The drain mark: written whole (temp + rename, synced) unless one is
 * there, whose stamp stays; or removed. */
static int drain_call(dir_store *ds, claims_box_call call, const claims_box *record,
                      claims_box *out, act_error *err)
{
    *out = (claims_box){0};
    snprintf(out->box, sizeof(out->box), "%s", record->box);
    _cleanup_close_ int drain_fd = open_subdir(ds, DIR_DRAIN_DIR, call == CLAIMS_BOX_DRAIN, err);
    if (drain_fd == -ENOENT)
        return 0; /* nothing to undrain */
    if (drain_fd < 0)
        return drain_fd;
    char name[ACT_NAME_MAX + 8];
    snprintf(name, sizeof(name), "%s.json", record->box);
    int r = dir_lock(ds, err);
    if (r < 0)
        return r;
    if (call == CLAIMS_BOX_UNDRAIN) {
        if (unlinkat(drain_fd, name, 0) < 0 && errno != ENOENT)
            r = act_error_set(err, errno, "box %s: cannot remove its drain mark %s/%s/%s: %m",
                              record->box, ds->path, DIR_DRAIN_DIR, name);
        dir_unlock(ds);
        return r;
    }
    uint64_t since = 0;
    act_error unreadable = {0};
    if (read_drain(ds, drain_fd, record->box, &since, &unreadable) > 0) {
        out->drained_usec = since;
        dir_unlock(ds);
        return 0;
    }
    _cleanup_free_ char *text = claims_drain_to_json(record->box, record->drained_usec);
    act_error why = {0};
    if (!text)
        r = act_error_set(err, ENOMEM, "box %s: out of memory", record->box);
    else if ((r = act_write_atomic(drain_fd, name, text, strlen(text), 0644, &why)) < 0)
        r = act_error_set(err, -r, "box %s: cannot write its drain mark in %s/%s: %s", record->box,
                          ds->path, DIR_DRAIN_DIR, why.message);
    else
        out->drained_usec = record->drained_usec;
    dir_unlock(ds);
    return r;
}

int dir_box_call(claim_store *store, claims_box_call call, const claims_box *record,
                 claims_box *out, act_error *err)
{
    dir_store *ds = (dir_store *)store;
    if (call == CLAIMS_BOX_DRAIN || call == CLAIMS_BOX_UNDRAIN)
        return drain_call(ds, call, record, out, err);
    _cleanup_close_ int boxes_fd = open_boxes(ds, call != CLAIMS_BOX_REMOVE, err);
    if (boxes_fd == -ENOENT)
        return 0; /* nothing to remove */
    if (boxes_fd < 0)
        return boxes_fd;
    /* Under the store's lock, so a keepalive never rewrites a record another
     * start of the box put between its check and its write. */
    int r = dir_lock(ds, err);
    if (r < 0)
        return r;
    switch (call) {
    case CLAIMS_BOX_PUT:
    case CLAIMS_BOX_KEEPALIVE:
        /* Renewing is writing the record again with a new expiry. */
        if (call == CLAIMS_BOX_KEEPALIVE)
            r = check_still_ours(ds, boxes_fd, record, err);
        if (r >= 0)
            r = write_record(ds, boxes_fd, record, out, err);
        break;
    case CLAIMS_BOX_REMOVE:
        r = remove_record(ds, boxes_fd, record, err);
        break;
    case CLAIMS_BOX_DRAIN:
    case CLAIMS_BOX_UNDRAIN:
        break; /* drain_call's */
    }
    dir_unlock(ds);
    return r;
}

/* The box named by a directory entry "<box>.json", or false. */
static bool entry_box(const struct dirent *entry, char box[ACT_NAME_MAX + 1])
{
    size_t len = strlen(entry->d_name);
    if (len <= 5 || len - 5 > ACT_NAME_MAX || strcmp(entry->d_name + len - 5, ".json") != 0)
        return false;
    snprintf(box, ACT_NAME_MAX + 1, "%.*s", (int)(len - 5), entry->d_name);
    return act_name_is_valid(box);
}

/* Every record of .boxes into *boxes. */
static int list_records(dir_store *ds, claims_box **boxes, size_t *n, size_t *cap, act_error *err)
{
    _cleanup_close_ int boxes_fd = open_boxes(ds, false, err);
    if (boxes_fd == -ENOENT)
        return 0;
    if (boxes_fd < 0)
        return boxes_fd;
    _cleanup_(closedirp) DIR *dir = act_opendir_at(boxes_fd, ".");
    if (!dir)
        return act_error_set(err, errno, "claim store %s: cannot list %s: %m", ds->path,
                             DIR_BOXES_DIR);
    struct dirent *entry;
    while ((entry = readdir(dir))) {
        char box[ACT_NAME_MAX + 1];
        if (!entry_box(entry, box))
            continue;
        if (*n == *cap) {
            size_t grown_cap = *cap ? *cap * 2 : 8;
            claims_box *grown = realloc(*boxes, grown_cap * sizeof(**boxes));
            if (!grown)
                return act_error_set(err, ENOMEM, "claim store %s: out of memory", ds->path);
            *boxes = grown;
            *cap = grown_cap;
        }
        act_error bad = {0};
        int r = read_record(ds, boxes_fd, box, &(*boxes)[*n], &bad);
        if (r > 0)
            (*n)++;
        else if (r < 0)
            act_log(LOG_WARNING, "box list skipped: %s", bad.message);
    }
    return 0;
}

/* Every drain mark of .drain onto *boxes. */
static int list_drains(dir_store *ds, claims_box **boxes, size_t *n, size_t *cap, act_error *err)
{
    _cleanup_close_ int drain_fd = open_subdir(ds, DIR_DRAIN_DIR, false, err);
    if (drain_fd == -ENOENT)
        return 0;
    if (drain_fd < 0)
        return drain_fd;
    _cleanup_(closedirp) DIR *dir = act_opendir_at(drain_fd, ".");
    if (!dir)
        return act_error_set(err, errno, "claim store %s: cannot list %s: %m", ds->path,
                             DIR_DRAIN_DIR);
    struct dirent *entry;
    while ((entry = readdir(dir))) {
        char box[ACT_NAME_MAX + 1];
        uint64_t since = 0;
        act_error bad = {0};
        if (!entry_box(entry, box))
            continue;
        int r = read_drain(ds, drain_fd, box, &since, &bad);
        if (r < 0)
            act_log(LOG_WARNING, "box list: %s; the box is listed as drained", bad.message);
        /* A mark that cannot be read still says an operator drained the
         * box: taking it as drained is the side that hands it no host. */
        if (r != 0 &&
            (r = claims_box_list_add_drain(boxes, n, cap, box, since ? since : 1, err)) < 0)
            return r;
    }
    return 0;
}

/* what is not looked at: a record's file says when its lease expires, so
 * the one listing of .boxes answers liveness and expiry alike; the drain
 * marks are read beside it. */
int dir_box_list(claim_store *store, claims_box_listing what, claims_box **out, size_t *n_out,
                 act_error *err)
{
    dir_store *ds = (dir_store *)store;
    _cleanup_free_ claims_box *boxes = NULL;
    size_t n = 0, cap = 0;
    int r = list_records(ds, &boxes, &n, &cap, err);
    if (r >= 0)
        r = list_drains(ds, &boxes, &n, &cap, err);
    if (r < 0)
        return r;
    if (n > 1)
        qsort(boxes, n, sizeof(*boxes), claims_box_compare);
    *out = TAKE_PTR(boxes);
    *n_out = n;
    return 0;
}

int dir_box_live_locked(dir_store *ds, const char *box, bool *live, act_error *err)
{
    *live = false;
    _cleanup_close_ int boxes_fd = open_boxes(ds, false, err);
    if (boxes_fd == -ENOENT)
        return 0;
    if (boxes_fd < 0)
        return boxes_fd;
    claims_box record;
    int r = read_record(ds, boxes_fd, box, &record, err);
    if (r > 0)
        *live = record.live;
    return r < 0 ? r : 0;
}
