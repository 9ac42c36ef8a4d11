/* The embedded claim store: one JSON file per host in a directory, with
 * compare-and-swap under flock. Layout in store_dir.h. */
#include "claims/store_dir.h"

#include <assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/cleanup_json.h"
#include "common/fileio.h"
#include "common/json_fields.h"
#include "common/log.h"
#include "common/names.h"
#include "common/text.h"

/* One host's claim file, open, and what it holds. */
typedef struct claim_file {
    int fd; /* -1: no file */
    uint8_t *image;
    size_t size;
    claim_slot_pick pick;
} claim_file;

static void claim_file_close(claim_file *cf)
{
    if (cf->fd >= 0)
        close(cf->fd);
    free(cf->image);
    *cf = (claim_file){.fd = -1};
}

/* A read that met both slots failing their checksums tries again this many
 * times: outside the lock, a writer may be rewriting the older slot while
 * the newer one is read, and only two writes inside one read could fail
 * both. Under the lock it is damage at once. */
#define TORN_READ_TRIES 3

/* Opens <host>.claim and reads it whole. 1 with *cf (cf->pick.slot -1 when
 * both slots fail their checksums), 0 when there is no file, negative with
 * *err when it cannot be read or is no claim file. writable opens it for a
 * write in place, and means the caller holds the lock. */
static int claim_file_open(dir_store *ds, const char *host, bool writable, claim_file *cf,
                           act_error *err)
{
    char name[ACT_NAME_MAX + sizeof(DIR_CLAIM_SUFFIX)];
    snprintf(name, sizeof(name), "%s" DIR_CLAIM_SUFFIX, host);
    *cf = (claim_file){.fd = -1};
    cf->fd = openat(ds->dirfd, name, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW);
    if (cf->fd < 0 && errno == ENOENT)
        return 0;
    if (cf->fd < 0)
        return act_error_set(err, errno, "host %s: cannot open claim file %s/%s: %m", host,
                             ds->path, name);
    struct stat st;
    if (fstat(cf->fd, &st) < 0) {
        int e = errno;
        claim_file_close(cf);
        return act_error_set(err, e, "host %s: cannot stat claim file %s/%s: %s", host, ds->path,
                             name, strerror(e));
    }
    if (S_ISREG(st.st_mode) && st.st_size > 2 * CLAIM_SLOT_SIZE_MAX) {
        claim_file_close(cf);
        return act_error_set(err, EFBIG,
                             "host %s: %s/%s is larger than any claim file (a claim's limit is "
                             "%d bytes); it is not a claim: delete it",
                             host, ds->path, name, CLAIM_JSON_MAX);
    }
    const char *why = !S_ISREG(st.st_mode) ? "it is not a regular file"
                      : st.st_size == 0    ? "it is empty"
                                           : NULL;
    cf->size = (size_t)st.st_size;
    cf->image = why ? NULL : malloc(cf->size);
    if (!why && !cf->image) {
        claim_file_close(cf);
        return act_error_set(err, ENOMEM, "host %s: out of memory", host);
    }
    for (int tries = writable ? 1 : TORN_READ_TRIES; !why && tries > 0; tries--) {
        ssize_t n = pread(cf->fd, cf->image, cf->size, 0);
        if (n < 0) {
            int e = errno;
            claim_file_close(cf);
            return act_error_set(err, e, "host %s: cannot read claim file %s/%s: %s", host,
                                 ds->path, name, strerror(e));
        }
        if ((size_t)n != cf->size)
            why = "it changed size while read";
        else if (claim_slots_pick(cf->image, cf->size, &cf->pick, &why) == 0 &&
                 (cf->pick.slot >= 0 || tries == 1))
            return 1;
    }
    claim_file_close(cf);
    return act_error_set(err, EINVAL,
                         "host %s: %s/%s is not a claim file (%s); delete it and write the claim "
                         "again (activatorctl claim import)",
                         host, ds->path, name, why);
}

/* The claim cf holds. 1 with *out, 0 for a tombstone, negative when the
 * file is damaged (both slots torn) or its claim malformed. *revision is
 * set whenever a slot is whole, even if its claim is malformed, so a CAS
 * naming it can repair it. */
static int claim_file_claim(dir_store *ds, const char *host, const claim_file *cf, claim *out,
                            uint64_t *revision, act_error *err)
{
    memset(out, 0, sizeof(*out));
    *revision = 0;
    if (cf->pick.slot < 0)
        return act_error_set(err, EIO,
                             "host %s: both slots of claim file %s/%s" DIR_CLAIM_SUFFIX
                             " fail their checksums: it is damaged; delete it and write the "
                             "claim again (activatorctl claim import)",
                             host, ds->path, host);
    *revision = cf->pick.revision;
    if (cf->pick.deleted)
        return 0;
    int r = claim_from_json(host, cf->pick.payload, cf->pick.len, out, err);
    if (r < 0)
        return act_error_prefix(err,
                                "claim file %s/%s" DIR_CLAIM_SUFFIX " holds no valid claim; "
                                "rewrite it with a CAS",
                                ds->path, host);
    out->revision = cf->pick.revision;
    return 1;
}

/* Reads host's claim. Returns 1 with the claim, 0 when absent (no file or a
 * tombstone; *revision is then the tombstone's or 0), negative when the file
 * is unreadable. *revision as claim_file_claim sets it. */
static int read_claim(dir_store *ds, const char *host, claim *out, uint64_t *revision,
                      act_error *err)
{
    claim_file cf;
    *revision = 0;
    memset(out, 0, sizeof(*out));
    int r = claim_file_open(ds, host, false, &cf, err);
    if (r > 0)
        r = claim_file_claim(ds, host, &cf, out, revision, err);
    claim_file_close(&cf);
    return r;
}

static int dir_read(claim_store *store, const char *host, claim *out, act_error *err)
{
    uint64_t revision;
    return read_claim((dir_store *)store, host, out, &revision, err);
}

static int read_ceiling(dir_store *ds, uint64_t *out, act_error *err)
{
    _cleanup_free_ char *text = NULL;
    size_t len;
    act_error why = {0};
    int r = act_read_file(ds->dirfd, DIR_REVISION_FILE, 64, &text, &len, &why);
    *out = 0;
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return act_error_set(err, -r, "claim store %s: cannot read revision counter: %s",
                             ds->path, why.message);
    char *end;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno || end == text || (*end && *end != '\n'))
        return act_error_set(err, EINVAL,
                             "claim store %s: %s/%s is not a number; restore it to at least the "
                             "highest revision in the claim files",
                             ds->path, ds->path, DIR_REVISION_FILE);
    *out = value;
    return 0;
}

/* "<20 digits> <boot id>\n": fixed width, so an in-place write never leaves
 * the tail of a longer older record behind. */
#define LAST_RECORD_FORMAT "%020" PRIu64 " %s\n"

int dir_last_revision(dir_store *ds, uint64_t *last, uint64_t *ceiling, act_error *err)
{
    assert(ds);
    assert(last);
    assert(ceiling);
    int r = read_ceiling(ds, ceiling, err);
    if (r < 0)
        return r;
    *last = *ceiling;
    char record[128];
    ssize_t n = pread(ds->last_fd, record, sizeof(record) - 1, 0);
    if (n <= 0 || !ds->boot_id[0])
        return 0;
    record[n] = '\0';
    char *end;
    errno = 0;
    unsigned long long value = strtoull(record, &end, 10);
    /* Another boot's record may have lost writes to a power cut; so may one
     * that is ahead of the durable ceiling (hand-edited). Both fall back to
     * the ceiling, which no revision ever passed. */
    if (errno || end == record || *end != ' ' || strncmp(end + 1, ds->boot_id,
                                                          strlen(ds->boot_id)) != 0 ||
        value > *ceiling)
        return 0;
    *last = value;
    return 0;
}

static int write_last_revision(dir_store *ds, uint64_t revision, act_error *err)
{
    char record[128];
    int n = snprintf(record, sizeof(record), LAST_RECORD_FORMAT, revision, ds->boot_id);
    if (pwrite(ds->last_fd, record, (size_t)n, 0) != n)
        return act_error_set(err, errno ? errno : EIO,
                             "claim store %s: cannot write %s: %m", ds->path,
                             DIR_REVISION_LAST_FILE);
    return 0;
}

/* Starts the journal afresh with only its header: every revision up to
 * compacted is in the claim files alone. Written temp + fsync + rename, so
 * a crash leaves the old journal whole or the new one, never a journal that
 * lost its header: a reader could not tell what it missed. */
static int journal_restart(dir_store *ds, uint64_t compacted, act_error *err)
{
    char header[64];
    int n = snprintf(header, sizeof(header), "{\"compacted\":%" PRIu64 "}\n", compacted);
    return act_write_atomic(ds->dirfd, DIR_JOURNAL_FILE, header, (size_t)n, 0644, err);
}

/* Appends one change to the journal, which starts afresh (with a header)
 * when it is missing or past DIR_JOURNAL_MAX. A last line without its
 * newline was torn by a writer that died mid-append: it is ended first, so
 * readers see it as one corrupt line and this change whole on its own.
 * Failure here is logged, not returned: the claim is already durably
 * written, and failing the CAS would make the caller retry a write that
 * happened. The append is not fsync'd: the journal only feeds watches, and
 * a watch that finds it short after a crash lists the claims again. */
static void journal_append(dir_store *ds, const char *host, uint64_t revision, const char *payload,
                           const claim_boxes *boxes)
{
    struct stat st;
    act_error err = {0};
    bool missing = fstatat(ds->dirfd, DIR_JOURNAL_FILE, &st, 0) < 0;
    if ((missing || st.st_size > DIR_JOURNAL_MAX) && journal_restart(ds, revision - 1, &err) < 0)
        act_log(LOG_WARNING, "claim store %s: cannot start the journal afresh: %s", ds->path,
                err.message);
    /* Written as text around the claim's JSON the claim file got, not
     * encoded again: host and box names need no escaping (common/names.c). */
    char named[CLAIM_BOXES_MAX * (ACT_NAME_MAX + 3) + 1] = "";
    for (size_t i = 0, used = 0; i < boxes->n; i++)
        used += (size_t)snprintf(named + used, sizeof(named) - used, "%s\"%s\"", i ? "," : "",
                                 boxes->box[i]);
    _cleanup_free_ char *with_newline = NULL;
    if (asprintf(&with_newline, "{\"revision\":%" PRIu64 ",\"host\":\"%s\",\"boxes\":[%s],%s%s}\n",
                 revision, host, named, payload ? "\"claim\":" : "\"deleted\":true",
                 payload ? payload : "") < 0)
        return;
    _cleanup_close_ int fd =
        openat(ds->dirfd, DIR_JOURNAL_FILE, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    char last = '\n';
    if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 0 &&
        pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n' && write(fd, "\n", 1) != 1)
        last = 0;
    size_t len = strlen(with_newline);
    if (fd < 0 || last == 0 || write(fd, with_newline, len) != (ssize_t)len)
        act_log(LOG_WARNING, "claim store %s: cannot append to the journal: %m; watchers may "
                             "miss revision %" PRIu64, ds->path, revision);
}

/* Makes sure .by-box/<box>/<host> exists for each box c names, durably,
 * before the claim file that names it is written: a box's listing must
 * never miss a claim that names it, even after a crash. A hint that is
 * there already costs one failed open. */
static int index_hints(dir_store *ds, const char *host, const claim *c, act_error *err)
{
    claim_boxes boxes;
    claim_named_boxes(c, &boxes);
    for (size_t i = 0; i < boxes.n; i++) {
        char path[sizeof(DIR_INDEX_DIR) + 2 * (ACT_NAME_MAX + 1)];
        snprintf(path, sizeof(path), DIR_INDEX_DIR "/%s/%s", boxes.box[i], host);
        if (faccessat(ds->dirfd, path, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
            continue;
        snprintf(path, sizeof(path), DIR_INDEX_DIR "/%s", boxes.box[i]);
        if ((mkdirat(ds->dirfd, DIR_INDEX_DIR, 0755) < 0 && errno != EEXIST) ||
            (mkdirat(ds->dirfd, path, 0755) < 0 && errno != EEXIST))
            return act_error_set(err, errno, "host %s: cannot make %s/%s: %m", host, ds->path,
                                 path);
        _cleanup_close_ int boxfd = openat(ds->dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_close_ int hint =
            boxfd < 0 ? -1 : openat(boxfd, host, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        act_error why = {0};
        if (hint < 0 || act_fsync_dir(boxfd, &why) < 0 || act_fsync_dir(ds->dirfd, &why) < 0)
            return act_error_set(
                err, errno ? errno : EIO, "host %s: cannot write the index entry %s/%s/%s: %s",
                host, ds->path, path, host, why.message[0] ? why.message : "open failed");
    }
    return 0;
}

int dir_create_claim_file(dir_store *ds, const char *host, uint64_t revision, const char *payload,
                          size_t len, act_error *err)
{
    bool deleted = payload == NULL;
    size_t slot_size = claim_slots_size_for(len);
    _cleanup_free_ uint8_t *image = calloc(2, slot_size);
    if (!image)
        return act_error_set(err, ENOMEM, "host %s: out of memory", host);
    claim_slots_encode(image, slot_size, 0, revision, deleted, deleted ? "" : payload,
                       deleted ? 0 : len);
    char name[ACT_NAME_MAX + sizeof(DIR_CLAIM_SUFFIX)];
    snprintf(name, sizeof(name), "%s" DIR_CLAIM_SUFFIX, host);
    act_error why = {0};
    int r = act_write_atomic(ds->dirfd, name, image, 2 * slot_size, 0644, &why);
    return r < 0 ? act_error_set(err, -r, "host %s: cannot write claim: %s", host, why.message) : 0;
}

/* Writes host's record (a tombstone when payload is NULL) into its claim
 * file: in place into the slot that does not hold the claim now, when the
 * file is there and the record fits (one write, one fdatasync); else a new
 * file made whole beside it and renamed over it (a host's first claim, or
 * one that outgrew its slots). */
static int write_claim_file(dir_store *ds, const char *host, claim_file *cf, uint64_t revision,
                            const char *payload, size_t len, act_error *err)
{
    if (cf->fd >= 0 && cf->pick.slot_size && len + CLAIM_SLOT_HEADER <= cf->pick.slot_size) {
        act_error why = {0};
        int slot = cf->pick.slot == 0 ? 1 : 0;
        int r = claim_slots_write(cf->fd, cf->pick.slot_size, slot, revision, !payload,
                                  payload ? payload : "", len, ds->io, &why);
        return r < 0
                   ? act_error_set(err, -r,
                                   "host %s: cannot write claim file %s/%s" DIR_CLAIM_SUFFIX ": %s",
                                   host, ds->path, host, why.message)
                   : 0;
    }
    return dir_create_claim_file(ds, host, revision, payload, len, err);
}

/* Writes host's next state (c, or a tombstone when c is NULL) under the lock
 * once the expected revision matched: the revision first (the ceiling when
 * it must move, then the last revision), so neither is ever behind a claim
 * file, then the file, then the journal. before is the claim replaced (NULL
 * when there was none): the journal line names its boxes with c's. */
static int commit_locked(dir_store *ds, const char *host, claim_file *cf, uint64_t current_revision,
                         const claim *before, const claim *c, uint64_t *new_revision,
                         act_error *err)
{
    uint64_t last, ceiling;
    int r = c ? index_hints(ds, host, c, err) : 0;
    if (r < 0)
        return r;
    _cleanup_free_ char *payload = c ? claim_to_json(c) : NULL;
    if (c && !payload)
        return act_error_set(err, ENOMEM, "host %s: out of memory", host);
    size_t len = payload ? strlen(payload) : 0;
    if (len > CLAIM_JSON_MAX)
        return act_error_set(err, EFBIG, "host %s: claim is over the %d byte limit", host,
                             CLAIM_JSON_MAX);
    r = dir_last_revision(ds, &last, &ceiling, err);
    if (r < 0)
        return r;
    /* The max guards a host file whose revision got ahead of a hand-edited
     * counter: a revision must never repeat for one host. */
    uint64_t next = (last > current_revision ? last : current_revision) + 1;
    act_error why = {0};
    if (next > ceiling) {
        char number[32];
        int n = snprintf(number, sizeof(number), "%" PRIu64 "\n", next + DIR_REVISION_STEP - 1);
        if ((r = act_write_atomic(ds->dirfd, DIR_REVISION_FILE, number, (size_t)n, 0644, &why)) <
            0)
            return act_error_set(err, -r, "claim store %s: cannot advance the revision: %s",
                                 ds->path, why.message);
    }
    if ((r = write_last_revision(ds, next, err)) < 0)
        return r;
    if ((r = write_claim_file(ds, host, cf, next, payload, len, err)) < 0)
        return r;
    claim_boxes boxes = {0}, after;
    if (before)
        claim_named_boxes(before, &boxes);
    if (c) {
        claim_named_boxes(c, &after);
        claim_boxes_merge(&boxes, &after);
    }
    journal_append(ds, host, next, payload, &boxes);
    *new_revision = next;
    return 0;
}

int dir_lock(dir_store *ds, act_error *err)
{
    assert(ds);
    pthread_mutex_lock(&ds->thread_lock);
    while (flock(ds->lockfd, LOCK_EX) < 0) {
        if (errno != EINTR) {
            int e = errno;
            pthread_mutex_unlock(&ds->thread_lock);
            return act_error_set(err, e, "claim store %s: cannot lock %s: %s", ds->path,
                                 DIR_LOCK_FILE, strerror(e));
        }
    }
    return 0;
}

void dir_unlock(dir_store *ds)
{
    assert(ds);
    flock(ds->lockfd, LOCK_UN);
    pthread_mutex_unlock(&ds->thread_lock);
}

/* The shared body of cas and delete; c == NULL deletes. */
static int dir_write(dir_store *ds, const char *host, uint64_t expected, const claim *c,
                     const char *dead_box, uint64_t *new_revision, claim *current, act_error *err)
{
    int r = dir_lock(ds, err);
    if (r < 0)
        return r;
    claim_file cf;
    claim existing;
    uint64_t revision = 0;
    act_error read_err = {0};
    r = claim_file_open(ds, host, true, &cf, &read_err);
    if (r > 0)
        r = claim_file_claim(ds, host, &cf, &existing, &revision, &read_err);
    /* A malformed claim whose revision is known can be replaced by a CAS that
     * names that revision; that is how an operator repairs it. */
    if (r < 0 && !(revision != 0 && revision == expected && expected != 0)) {
        claim_file_close(&cf);
        dir_unlock(ds);
        *err = read_err;
        return -read_err.errnum;
    }
    uint64_t current_revision = r > 0 ? revision : 0;
    if (r >= 0 && current_revision != expected) {
        claim_file_close(&cf);
        dir_unlock(ds);
        if (current)
            *current = r > 0 ? existing : (claim){0};
        if (current && r == 0)
            snprintf(current->host, sizeof(current->host), "%s", host);
        return CLAIMS_CHANGED;
    }
    bool live = false;
    if (dead_box && dir_box_live_locked(ds, dead_box, &live, err) < 0) {
        claim_file_close(&cf);
        dir_unlock(ds);
        return -err->errnum;
    }
    if (live) {
        claim_file_close(&cf);
        dir_unlock(ds);
        return act_error_set(err, -CLAIMS_BOX_LIVE,
                             "host %s: box %s has a live record again; it was not taken from it",
                             host, dead_box);
    }
    r = commit_locked(ds, host, &cf, revision, r > 0 ? &existing : NULL, c, new_revision, err);
    claim_file_close(&cf);
    dir_unlock(ds);
    return r;
}

static int dir_cas(claim_store *store, const char *host, uint64_t expected, const claim *c,
                   const char *dead_box, uint64_t *new_revision, claim *current, act_error *err)
{
    uint64_t revision = 0;
    int r = dir_write((dir_store *)store, host, expected, c, dead_box, &revision, current, err);
    if (r == 0 && new_revision)
        *new_revision = revision;
    return r;
}

static int dir_delete(claim_store *store, const char *host, uint64_t expected,
                      uint64_t *new_revision, claim *current, act_error *err)
{
    if (expected == 0) {
        /* Revision 0 means "absent", so deleting it is always a conflict:
         * report what is there. */
        claim now;
        int r = dir_read(store, host, &now, err);
        if (r < 0)
            return r;
        if (current) {
            *current = r > 0 ? now : (claim){0};
            snprintf(current->host, sizeof(current->host), "%s", host);
        }
        return CLAIMS_CHANGED;
    }
    return dir_write((dir_store *)store, host, expected, NULL, NULL, new_revision, current, err);
}

bool dir_host_file_name(const char *name, const char *suffix, char *host, size_t host_size)
{
    size_t len = strlen(name), tail = strlen(suffix);
    if (len <= tail || strcmp(name + len - tail, suffix) != 0 || len - tail >= host_size)
        return false;
    memcpy(host, name, len - tail);
    host[len - tail] = '\0';
    return act_name_is_valid(host);
}

/* Reads every claim file, or (box set) those box's index names. The caller
 * holds the lock, so no write lands while the files are read: the list is
 * the store as of one revision. */
static int list_locked(dir_store *ds, const char *box, claim **out, size_t *n_out,
                       claims_problem_fn problem, void *userdata, act_error *err)
{
    char where[sizeof(DIR_INDEX_DIR) + ACT_NAME_MAX + 2] = ".";
    if (box)
        snprintf(where, sizeof(where), DIR_INDEX_DIR "/%s", box);
    _cleanup_(closedirp) DIR *dir = act_opendir_at(ds->dirfd, where);
    if (!dir && box && errno == ENOENT) {
        /* No claim ever named box. */
        *out = NULL;
        *n_out = 0;
        return 0;
    }
    if (!dir)
        return act_error_set(err, errno, "claim store %s: cannot list %s: %m", ds->path, where);
    _cleanup_free_ claim *claims = NULL;
    size_t n = 0, cap = 0;
    struct dirent *entry;
    while ((entry = readdir(dir))) {
        char host[ACT_NAME_MAX + 1];
        if (box ? !act_name_is_valid(entry->d_name) || strlen(entry->d_name) > ACT_NAME_MAX
                : !dir_host_file_name(entry->d_name, DIR_CLAIM_SUFFIX, host, sizeof(host)))
            continue;
        if (box)
            snprintf(host, sizeof(host), "%s", entry->d_name);
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            claim *grown = realloc(claims, cap * sizeof(*claims));
            if (!grown)
                return act_error_set(err, ENOMEM, "claim store %s: out of memory", ds->path);
            claims = grown;
        }
        uint64_t revision;
        act_error bad = {0};
        int r = read_claim(ds, host, &claims[n], &revision, &bad);
        if (r > 0)
            n++;
        else if (r < 0 && problem)
            problem(host, &bad, userdata);
        else if (r < 0)
            act_log(LOG_WARNING, "claim list skipped: %s", bad.message);
    }
    if (n > 1)
        qsort(claims, n, sizeof(*claims), claims_compare_by_host);
    *out = TAKE_PTR(claims);
    *n_out = n;
    return 0;
}

static int dir_list(claim_store *store, const char *box, claim **out, size_t *n_out,
                    uint64_t *revision, claims_problem_fn problem, void *userdata, act_error *err)
{
    dir_store *ds = (dir_store *)store;
    int r = dir_lock(ds, err);
    if (r < 0)
        return r;
    uint64_t ceiling;
    r = dir_last_revision(ds, revision, &ceiling, err);
    if (r >= 0)
        r = list_locked(ds, box, out, n_out, problem, userdata, err);
    dir_unlock(ds);
    return r;
}

/* The marker {"layout":3}. A store without one, or laid out as 2 (a JSON
 * file per claim), has its claims moved into claim files first
 * (store_dir_migrate.c), all under the lock, and gets the marker last: a
 * crash on the way leaves a store the next check moves on from. */
static int dir_check_layout(claim_store *store, act_error *err)
{
    dir_store *ds = (dir_store *)store;
    int r = dir_lock(ds, err);
    if (r < 0)
        return r;
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    act_error why = {0};
    r = act_read_file(ds->dirfd, DIR_LAYOUT_FILE, 256, &text, &len, &why);
    if (r < 0 && r != -ENOENT) {
        dir_unlock(ds);
        return act_error_set(err, -r, "claim store %s: cannot read %s: %s", ds->path,
                             DIR_LAYOUT_FILE, why.message);
    }
    _cleanup_(json_object_putp) json_object *parsed = r < 0 ? NULL : json_tokener_parse(text);
    json_object *field = NULL;
    int64_t layout = r == -ENOENT ? 0 : -1;
    if (parsed && json_object_object_get_ex(parsed, "layout", &field) &&
        json_object_is_type(field, json_type_int))
        layout = json_object_get_int64(field);
    if (layout == DIR_LAYOUT) {
        dir_unlock(ds);
        return 0;
    }
    if (layout == 0 || layout == DIR_LAYOUT_JSON_FILES) {
        char marker[32];
        int n = snprintf(marker, sizeof(marker), "{\"layout\":%d}\n", DIR_LAYOUT);
        r = dir_migrate_json_claims_locked(ds, err);
        if (r >= 0 &&
            (r = act_write_atomic(ds->dirfd, DIR_LAYOUT_FILE, marker, (size_t)n, 0644, &why)) < 0)
            act_error_set(err, -r, "claim store %s: cannot write %s: %s", ds->path, DIR_LAYOUT_FILE,
                          why.message);
        dir_unlock(ds);
        return r < 0 ? r : 0;
    }
    dir_unlock(ds);
    char shown[ACT_TEXT_SHOW_MAX];
    return act_error_set(err, EPROTONOSUPPORT,
                         "claim store %s: its layout marker %s/%s says \"%s\"; this activator "
                         "reads and writes {\"layout\":%d} (and moves a store of layout %d "
                         "to it) only: run the activator the store was laid out for, or point "
                         "Store= at another directory",
                         ds->path, ds->path, DIR_LAYOUT_FILE,
                         act_text_show_bytes(text, strcspn(text, "\n"), shown, sizeof(shown)),
                         DIR_LAYOUT, DIR_LAYOUT_JSON_FILES);
}

static void dir_free(claim_store *store)
{
    dir_store *ds = (dir_store *)store;
    if (ds->dirfd >= 0)
        close(ds->dirfd);
    if (ds->lockfd >= 0)
        close(ds->lockfd);
    if (ds->last_fd >= 0)
        close(ds->last_fd);
    pthread_mutex_destroy(&ds->thread_lock);
    free(ds->path);
    free(ds);
}

static const claims_store_ops dir_ops = {
    .kind = "dir",
    .free = dir_free,
    .read = dir_read,
    .cas = dir_cas,
    .del = dir_delete,
    .list = dir_list,
    .check_layout = dir_check_layout,
    .box_call = dir_box_call,
    .box_list = dir_box_list,
    .watch_start = dir_watch_start,
};

/* The kernel's id of this boot; "" if it has none to give, and then the
 * last-revision record is never trusted (every write moves the ceiling). */
static void read_boot_id(char *out, size_t size)
{
    out[0] = '\0';
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    if (act_read_file(AT_FDCWD, "/proc/sys/kernel/random/boot_id", 64, &text, &len, NULL) < 0)
        return;
    text[strcspn(text, "\n ")] = '\0';
    if (strlen(text) < size)
        memcpy(out, text, strlen(text) + 1);
}

int claims_dir_open(const char *path, const claims_store_options *options, claim_store **out,
                    act_error *err)
{
    assert(path);
    assert(out);
    act_error why = {0};
    int r = act_mkdir_p(path, 0755, &why);
    if (r < 0)
        return act_error_set(err, -r, "claim store %s: cannot create: %s", path, why.message);
    dir_store *ds = calloc(1, sizeof(*ds));
    if (!ds)
        return act_error_set(err, ENOMEM, "claim store %s: out of memory", path);
    ds->base.ops = &dir_ops;
    ds->io = &claim_slots_system_io;
    ds->dirfd = ds->lockfd = ds->last_fd = -1;
    pthread_mutex_init(&ds->thread_lock, NULL);
    /* From here a failed open frees the store the way any store is freed. */
    _cleanup_(claims_store_freep) claim_store *store = &ds->base;
    read_boot_id(ds->boot_id, sizeof(ds->boot_id));
    ds->path = strdup(path);
    if (!ds->path)
        return act_error_set(err, ENOMEM, "claim store %s: out of memory", path);
    ds->dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (ds->dirfd < 0)
        return act_error_set(err, errno, "claim store %s: cannot open: %m", path);
    ds->lockfd = openat(ds->dirfd, DIR_LOCK_FILE, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (ds->lockfd < 0)
        return act_error_set(err, errno, "claim store %s: cannot open %s: %m", path,
                             DIR_LOCK_FILE);
    ds->last_fd = openat(ds->dirfd, DIR_REVISION_LAST_FILE, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (ds->last_fd < 0)
        return act_error_set(err, errno, "claim store %s: cannot open %s: %m", path,
                             DIR_REVISION_LAST_FILE);
    *out = TAKE_PTR(store);
    return 0;
}

void claims_dir_use_io(claim_store *store, const claim_slots_io *io)
{
    assert(store && store->ops == &dir_ops);
    ((dir_store *)store)->io = io ? io : &claim_slots_system_io;
}
