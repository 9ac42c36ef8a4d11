/* Watching the dir store: inotify on the directory wakes the loop, and the
 * journal (store_dir.h) supplies every change in revision order, so a watcher
 * sees each write, not just the latest state of each file. */
#include <assert.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "claims/store_dir.h"
#include "common/cleanup.h"
#include "common/fileio.h"
#include "common/json_fields.h"
#include "common/names.h"
#include "common/text.h"

typedef struct dir_watch {
    claims_watch base;
    dir_store *ds;
    sd_event_source *io;
    sd_event_source *kick; /* the first catch-up, run from the loop, not from start */
    int inotify_fd;
    int journal_fd;
    ino_t journal_ino;
    uint64_t next; /* lowest revision not yet delivered */
    char box[ACT_NAME_MAX + 1];  /* "" = every claim; else only those concerning it */
    char host[ACT_NAME_MAX + 1]; /* "" = every claim; else only this host's */
    char *buf;     /* bytes read past the last complete line */
    size_t buf_len;
    bool dead;
} dir_watch;

/* True when the line's boxes (every box the claim named before or after
 * the write) hold box. */
static bool line_concerns(json_object *root, const char *box)
{
    json_object *boxes = NULL;
    if (!json_object_object_get_ex(root, "boxes", &boxes) ||
        !json_object_is_type(boxes, json_type_array))
        return false;
    for (size_t i = 0; i < json_object_array_length(boxes); i++) {
        json_object *named = json_object_array_get_idx(boxes, i);
        if (json_object_is_type(named, json_type_string) &&
            strcmp(json_object_get_string(named), box) == 0)
            return true;
    }
    return false;
}

int dir_journal_parse_line(const char *line, size_t len, const char *box, claim_change *change,
                           act_error *err)
{
    assert(line);
    assert(change);
    memset(change, 0, sizeof(*change));
    json_object *root = json_tokener_parse(line);
    json_object *rev = NULL, *compacted = NULL, *host = NULL, *body = NULL;
    int r = 0;
    if (!root || !json_object_is_type(root, json_type_object)) {
        r = act_error_set(err, EINVAL, "journal line is not a JSON object");
    } else if (json_object_object_get_ex(root, "compacted", &compacted)) {
        change->revision = json_object_get_uint64(compacted);
        r = 1;
    } else if (!json_object_object_get_ex(root, "revision", &rev) ||
               !json_object_is_type(rev, json_type_int) ||
               !json_object_object_get_ex(root, "host", &host) ||
               !json_object_is_type(host, json_type_string) ||
               !act_name_is_valid(json_object_get_string(host))) {
        r = act_error_set(err, EINVAL, "journal line lacks a revision or a valid host");
    } else {
        change->revision = json_object_get_uint64(rev);
        snprintf(change->claim.host, sizeof(change->claim.host), "%s",
                 json_object_get_string(host));
        if (box && !line_concerns(root, box)) {
            r = 2;
        } else if (act_json_bool_or(root, "deleted", false)) {
            change->kind = CLAIM_CHANGE_DELETE;
        } else if (!json_object_object_get_ex(root, "claim", &body) ||
                   claim_from_json_object(json_object_get_string(host), body, &change->claim,
                                          &change->problem) < 0) {
            change->kind = CLAIM_CHANGE_MALFORMED;
            snprintf(change->claim.host, sizeof(change->claim.host), "%s",
                     json_object_get_string(host));
        } else {
            change->kind = CLAIM_CHANGE_PUT;
            change->claim.revision = change->revision;
        }
    }
    json_object_put(root);
    return r;
}

/* Reports a fatal watch error once; returns false when the callback freed the
 * watch. */
static bool watch_fail(dir_watch *w, int error, const act_error *err)
{
    w->dead = true;
    sd_event_source_set_enabled(w->io, SD_EVENT_OFF);
    return claims_watch_deliver(&w->base, NULL, error, err);
}

/* Handles one complete line; false when the watch stopped or was freed. */
static bool handle_line(dir_watch *w, const char *line, size_t len)
{
    claim_change change;
    act_error err = {0};
    int r = dir_journal_parse_line(line, len, w->box[0] ? w->box : NULL, &change, &err);
    if (r < 0) {
        /* A line torn by a writer that died mid-append (the next writer
         * ended it), or one that is not a change: told, and skipped. Its
         * revision is unknown, so it is 0. */
        char shown[ACT_TEXT_SHOW_MAX];
        memset(&change, 0, sizeof(change));
        change.kind = CLAIM_CHANGE_MALFORMED;
        act_error_set(&change.problem, EINVAL,
                      "claim store %s: journal line \"%s\" is not a change (%s); skipped",
                      w->ds->path, act_text_show_bytes(line, len, shown, sizeof(shown)),
                      err.message);
        return claims_watch_deliver(&w->base, &change, 0, NULL) && !w->dead;
    }
    if (r == 1) {
        if (w->next <= change.revision) {
            act_error_set(&err, ENODATA,
                          "claim store %s: the journal is compacted up to revision %" PRIu64
                          " and this watch had read up to revision %" PRIu64
                          "; re-read the claims and watch from the revision of that read + 1",
                          w->ds->path, change.revision, w->next - 1);
            watch_fail(w, -ENODATA, &err);
            return false;
        }
        return true;
    }
    if (change.revision < w->next)
        return true;
    w->next = change.revision + 1;
    if (r == 2 || (w->host[0] && strcmp(change.claim.host, w->host) != 0))
        return true; /* another box's change, or another host's */
    return claims_watch_deliver(&w->base, &change, 0, NULL) && !w->dead;
}

/* A journal cut short in place (not restarted by a rename, which pump
 * follows) lost lines this watch may not have read: the watch ends. */
static bool check_not_cut(dir_watch *w)
{
    struct stat st;
    off_t offset = lseek(w->journal_fd, 0, SEEK_CUR);
    if (offset < 0 || fstat(w->journal_fd, &st) < 0 || st.st_size >= offset)
        return true;
    act_error err = {0};
    act_error_set(&err, ENODATA,
                  "claim store %s: the journal was cut to %lld bytes under a watch that had "
                  "read %lld; re-read the claims and watch from the revision of that read + 1",
                  w->ds->path, (long long)st.st_size, (long long)offset);
    watch_fail(w, -ENODATA, &err);
    return false;
}

/* Reads what the journal fd has and handles complete lines: a last line
 * without its newline stays buffered until the rest of it arrives. */
static bool drain_journal(dir_watch *w)
{
    for (;;) {
        char chunk[16384];
        ssize_t n = read(w->journal_fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            act_error err = {0};
            act_error_set(&err, errno, "claim store %s: cannot read journal: %m", w->ds->path);
            watch_fail(w, -err.errnum, &err);
            return false;
        }
        if (n == 0)
            return check_not_cut(w);
        char *grown = realloc(w->buf, w->buf_len + (size_t)n + 1);
        if (!grown)
            return true;
        w->buf = grown;
        memcpy(w->buf + w->buf_len, chunk, (size_t)n);
        w->buf_len += (size_t)n;
        size_t start = 0;
        for (size_t i = 0; i < w->buf_len; i++) {
            if (w->buf[i] != '\n')
                continue;
            w->buf[i] = '\0';
            if (!handle_line(w, w->buf + start, i - start))
                return false;
            start = i + 1;
        }
        memmove(w->buf, w->buf + start, w->buf_len - start);
        w->buf_len -= start;
    }
}

/* Catches up with the journal, following it across a compaction (a rename
 * over .journal): the old file is read to its end first, then the new one
 * from its start. */
static void pump(dir_watch *w)
{
    while (!w->dead) {
        if (w->journal_fd < 0) {
            w->journal_fd = openat(w->ds->dirfd, DIR_JOURNAL_FILE, O_RDONLY | O_CLOEXEC);
            if (w->journal_fd < 0)
                return;
            struct stat st;
            if (fstat(w->journal_fd, &st) == 0)
                w->journal_ino = st.st_ino;
            w->buf_len = 0;
        }
        if (!drain_journal(w))
            return;
        struct stat st;
        if (fstatat(w->ds->dirfd, DIR_JOURNAL_FILE, &st, 0) < 0 || st.st_ino == w->journal_ino)
            return;
        close(w->journal_fd);
        w->journal_fd = -1;
    }
}

static int on_inotify(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    char events[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    while (read(fd, events, sizeof(events)) > 0)
        ;
    pump(userdata);
    return 0;
}

static int on_kick(sd_event_source *source, void *userdata)
{
    pump(userdata);
    return 0;
}

static void dir_watch_free(claims_watch *watch)
{
    dir_watch *w = (dir_watch *)watch;
    sd_event_source_disable_unref(w->io);
    sd_event_source_disable_unref(w->kick);
    if (w->inotify_fd >= 0)
        close(w->inotify_fd);
    if (w->journal_fd >= 0)
        close(w->journal_fd);
    free(w->buf);
    free(w);
}

int dir_watch_start(claim_store *store, sd_event *event, const claims_watch_scope *scope,
                    uint64_t from_revision, claims_watch_fn fn, void *userdata, claims_watch **out,
                    act_error *err)
{
    assert(store);
    assert(event);
    assert(fn);
    assert(out);
    dir_store *ds = (dir_store *)store;
    dir_watch *w = calloc(1, sizeof(*w));
    if (!w)
        return act_error_set(err, ENOMEM, "claim watch: out of memory");
    *w = (dir_watch){.base = {.store = store, .fn = fn, .userdata = userdata,
                              .free = dir_watch_free},
                     .ds = ds, .inotify_fd = -1, .journal_fd = -1, .next = from_revision};
    if (scope && scope->box)
        snprintf(w->box, sizeof(w->box), "%s", scope->box);
    if (scope && scope->host)
        snprintf(w->host, sizeof(w->host), "%s", scope->host);
    /* From here a failed start frees the watch the way any watch is freed. */
    _cleanup_(claims_watch_freep) claims_watch *watch = &w->base;
    int r;
    if (from_revision == 0) {
        /* "From now": after the last revision handed out. */
        uint64_t last = 0, ceiling;
        if ((r = dir_lock(ds, err)) < 0)
            return r;
        r = dir_last_revision(ds, &last, &ceiling, err);
        dir_unlock(ds);
        if (r < 0)
            return r;
        w->next = last + 1;
    }
    w->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->inotify_fd < 0)
        return act_error_set(err, errno, "claim watch %s: inotify: %m", ds->path);
    if (inotify_add_watch(w->inotify_fd, ds->path, IN_MODIFY | IN_CREATE | IN_MOVED_TO) < 0)
        return act_error_set(err, errno, "claim watch %s: cannot watch the directory: %m",
                             ds->path);
    r = sd_event_add_io(event, &w->io, w->inotify_fd, EPOLLIN, on_inotify, w);
    if (r >= 0)
        r = sd_event_add_defer(event, &w->kick, on_kick, w);
    if (r < 0)
        return act_error_set(err, -r, "claim watch %s: cannot add to the event loop", ds->path);
    *out = TAKE_PTR(watch);
    return 0;
}
