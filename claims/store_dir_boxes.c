/* Box records on the dir store: <dir>/.boxes/<box>.json, each rewritten by
 * its daemon with the time its lease runs out. The claim listing reads only
 * "<host>.json" in <dir> and the watch only the journal, so neither meets a
 * record. A record is rewritten whole (temp + rename) under the store's
 * lock, so a reader never sees half of one. */
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

/* Opens <dir>/.boxes, made when create says so. Returns the fd, -ENOENT when
 * it is absent and not to be made, or another negative errno. */
static int open_boxes(dir_store *ds, bool create, act_error *err)
{
    if (create && mkdirat(ds->dirfd, DIR_BOXES_DIR, 0755) < 0 && errno != EEXIST)
        return act_error_set(err, errno, "claim store %s: cannot make %s: %m", ds->path,
                             DIR_BOXES_DIR);
    int fd = openat(ds->dirfd, DIR_BOXES_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && (create || errno != ENOENT))
        return act_error_set(err, errno, "claim store %s: cannot open %s: %m", ds->path,
                             DIR_BOXES_DIR);
    return fd < 0 ? -ENOENT : fd;
}

/* Reads box's record: 1 with *out (live judged now), 0 when there is none. */
static int read_record(dir_store *ds, int boxes_fd, const char *box, claims_box *out,
                       act_error *err)
{
    char name[ACT_NAME_MAX + 8];
    snprintf(name, sizeof(name), "%s.json", box);
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    act_error why = {0};
    int r = act_read_file(boxes_fd, name, CLAIMS_BOX_JSON_MAX, &text, &len, &why);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return act_error_set(err, -r, "box %s: cannot read %s/%s/%s: %s", box, ds->path,
                             DIR_BOXES_DIR, name, why.message);
    if ((r = claims_box_from_json(box, text, len, out, err)) < 0)
        return act_error_prefix(err, "%s/%s/%s", ds->path, DIR_BOXES_DIR, name);
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

int dir_box_call(claim_store *store, claims_box_call call, const claims_box *record,
                 claims_box *out, act_error *err)
{
    dir_store *ds = (dir_store *)store;
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
    }
    dir_unlock(ds);
    return r;
}

/* what is not looked at: a record's file says when its lease expires, so
 * the one listing of .boxes answers liveness and expiry alike. */
int dir_box_list(claim_store *store, claims_box_listing what, claims_box **out, size_t *n_out,
                 act_error *err)
{
    dir_store *ds = (dir_store *)store;
    _cleanup_close_ int boxes_fd = open_boxes(ds, false, err);
    if (boxes_fd == -ENOENT)
        return 0;
    if (boxes_fd < 0)
        return boxes_fd;
    _cleanup_(closedirp) DIR *dir = act_opendir_at(boxes_fd, ".");
    if (!dir)
        return act_error_set(err, errno, "claim store %s: cannot list %s: %m", ds->path,
                             DIR_BOXES_DIR);
    _cleanup_free_ claims_box *boxes = NULL;
    size_t n = 0, cap = 0;
    struct dirent *entry;
    while ((entry = readdir(dir))) {
        char box[ACT_NAME_MAX + 1];
        size_t len = strlen(entry->d_name);
        if (len <= 5 || len - 5 > ACT_NAME_MAX || strcmp(entry->d_name + len - 5, ".json") != 0)
            continue;
        snprintf(box, sizeof(box), "%.*s", (int)(len - 5), entry->d_name);
        if (!act_name_is_valid(box))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            claims_box *grown = realloc(boxes, cap * sizeof(*boxes));
            if (!grown)
                return act_error_set(err, ENOMEM, "claim store %s: out of memory", ds->path);
            boxes = grown;
        }
        act_error bad = {0};
        int r = read_record(ds, boxes_fd, box, &boxes[n], &bad);
        if (r > 0)
            n++;
        else if (r < 0)
            act_log(LOG_WARNING, "box list skipped: %s", bad.message);
    }
    if (n > 1)
        qsort(boxes, n, sizeof(*boxes), claims_box_compare);
    *out = TAKE_PTR(boxes);
    *n_out = n;
    return 0;
}
