/* The dynamic users of the hosts without User= (see accounts/dynamic_users.h). */
#include "activator/daemon/accounts/dynamic_users.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/names.h"

#define DIRECTORY "dynamic-users"
/* The records, one "<uid> <host>" line each, in DIRECTORY. */
#define RECORDS "records"
/* Far beyond any box's hosts (a line is at most 75 bytes). */
#define RECORDS_MAX (64u << 20)

typedef struct entry {
    uint32_t uid;
    char *host; /* NULL: a free slot */
} entry;

/* Two open-addressing tables over one set of records: by host name and by
 * uid. A box holds 10,000 hosts; each start looks every one of them up. */
struct ad_dynamic_users {
    int dirfd;
    uint32_t uid_min, uid_max;
    entry *by_host;
    size_t *by_uid; /* index into by_host + 1, 0 for a free slot */
    size_t cap;     /* a power of two, at least twice n */
    size_t n;
    uint32_t *excluded; /* sorted: ids hosts name by number in User=, Group= */
    size_t n_excluded;
    ad_system_ids *system; /* NULL: each id is looked up */
    bool defer_sync;       /* records are written by ad_dynamic_users_sync */
    bool unsynced;         /* RECORDS lacks a record made (or keeps one dropped) */
};

/* FNV-1a: a fixed function of the name, the same on every box. */
static uint32_t hash_name(const char *name)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h;
}

static uint32_t hash_uid(uint32_t uid)
{
    return uid * 2654435761u;
}

static entry *find_host(const ad_dynamic_users *users, const char *host)
{
    if (!users->cap)
        return NULL;
    for (size_t i = hash_name(host) & (users->cap - 1);; i = (i + 1) & (users->cap - 1)) {
        if (!users->by_host[i].host)
            return NULL;
        if (strcmp(users->by_host[i].host, host) == 0)
            return &users->by_host[i];
    }
}

static entry *find_uid(const ad_dynamic_users *users, uint32_t uid)
{
    if (!users->cap)
        return NULL;
    for (size_t i = hash_uid(uid) & (users->cap - 1);; i = (i + 1) & (users->cap - 1)) {
        if (!users->by_uid[i])
            return NULL;
        entry *e = &users->by_host[users->by_uid[i] - 1];
        if (e->uid == uid)
            return e;
    }
}

static void place(entry *by_host, size_t *by_uid, size_t cap, uint32_t uid, char *host)
{
    size_t slot = hash_name(host) & (cap - 1);
    while (by_host[slot].host)
        slot = (slot + 1) & (cap - 1);
    by_host[slot] = (entry){.uid = uid, .host = host};
    size_t i;
    for (i = hash_uid(uid) & (cap - 1); by_uid[i]; i = (i + 1) & (cap - 1))
        ;
    by_uid[i] = slot + 1;
}

/* Adds uid -> host (taken) to the tables, growing them; -ENOMEM. */
static int remember(ad_dynamic_users *users, uint32_t uid, char *host)
{
    if (2 * (users->n + 1) > users->cap) {
        size_t cap = users->cap ? 2 * users->cap : 64;
        entry *by_host = calloc(cap, sizeof(*by_host));
        size_t *by_uid = calloc(cap, sizeof(*by_uid));
        if (!by_host || !by_uid) {
            free(by_host);
            free(by_uid);
            free(host);
            return -ENOMEM;
        }
        for (size_t i = 0; i < users->cap; i++)
            if (users->by_host[i].host)
                place(by_host, by_uid, cap, users->by_host[i].uid, users->by_host[i].host);
        free(users->by_host);
        free(users->by_uid);
        users->by_host = by_host;
        users->by_uid = by_uid;
        users->cap = cap;
    }
    place(users->by_host, users->by_uid, users->cap, uid, host);
    users->n++;
    return 0;
}

void ad_dynamic_users_free(ad_dynamic_users *users)
{
    if (!users)
        return;
    for (size_t i = 0; i < users->cap; i++)
        free(users->by_host[i].host);
    free(users->by_host);
    free(users->by_uid);
    free(users->excluded);
    ad_system_ids_free(users->system);
    if (users->dirfd >= 0)
        close(users->dirfd);
    free(users);
}

/* "61234" as a uid; false for anything else. */
static bool parse_uid(const char *text, uint32_t *uid)
{
    size_t len = strlen(text);
    if (len == 0 || len > 10 || strspn(text, "0123456789") != len || (text[0] == '0' && len > 1))
        return false;
    unsigned long long value = strtoull(text, NULL, 10);
    if (value == 0 || value >= UINT32_MAX)
        return false;
    *uid = (uint32_t)value;
    return true;
}

/* Adds the record uid -> host read from where (a path, for the error). */
static int take_record(ad_dynamic_users *users, uint32_t uid, const char *host, const char *where,
                       act_error *err)
{
    const entry *other = find_host(users, host);
    if (other)
        return act_error_set(err, EEXIST,
                             "%s: host %s has a uid recorded twice (%" PRIu32 " and %" PRIu32
                             "); remove the record that is not the owner of its state directory",
                             where, host, other->uid, uid);
    if ((other = find_uid(users, uid)))
        return act_error_set(err, EEXIST,
                             "%s: uid %" PRIu32 " is recorded for host %s and host %s; remove the "
                             "record of the host that does not own its files",
                             where, uid, other->host, host);
    char *copy = strdup(host);
    return copy && remember(users, uid, copy) == 0 ? 0
                                                   : act_error_set(err, ENOMEM, "out of memory");
}

/* RECORDS: "<uid> <host>" lines; '#' starts a comment line. */
static int read_records(ad_dynamic_users *users, act_error *err)
{
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    act_error why = {0};
    int r = act_read_file(users->dirfd, RECORDS, RECORDS_MAX, &text, &len, &why);
    if (r < 0)
        return act_error_set(err, -r, "%s/%s: %s", DIRECTORY, RECORDS, why.message);
    unsigned number = 0;
    for (char *line = text, *next; line < text + len; line = next) {
        char *end = memchr(line, '\n', (size_t)(text + len - line));
        next = end ? end + 1 : text + len;
        if (end)
            *end = '\0';
        number++;
        if (line[0] == '#' || line[0] == '\0')
            continue;
        char *space = strchr(line, ' ');
        uint32_t uid = 0;
        act_error name_err = {0};
        char where[64];
        snprintf(where, sizeof(where), "%s/%s line %u", DIRECTORY, RECORDS, number);
        if (space)
            *space = '\0';
        if (!space || !parse_uid(line, &uid) || act_name_check("host", space + 1, &name_err) < 0)
            return act_error_set(err, EINVAL,
                                 "%s is not a dynamic user's record (\"<uid> <host>\"); fix or "
                                 "remove the line",
                                 where);
        if ((r = take_record(users, uid, space + 1, where, err)) < 0)
            return r;
    }
    return 0;
}

int ad_dynamic_users_open(int state_dirfd, uint32_t uid_min, uint32_t uid_max,
                          ad_dynamic_users **out, act_error *err)
{
    assert(out && uid_min > 0 && uid_min <= uid_max);
    *out = NULL;
    if (mkdirat(state_dirfd, DIRECTORY, 0700) < 0 && errno != EEXIST)
        return act_error_set(err, errno, "cannot create %s/: %s", DIRECTORY, strerror(errno));
    ad_dynamic_users *users = calloc(1, sizeof(*users));
    if (!users)
        return act_error_set(err, ENOMEM, "out of memory");
    *users = (ad_dynamic_users){.uid_min = uid_min, .uid_max = uid_max};
    users->dirfd = openat(state_dirfd, DIRECTORY, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (users->dirfd < 0) {
        int saved = errno;
        ad_dynamic_users_free(users);
        return act_error_set(err, saved, "cannot open %s/: %s", DIRECTORY, strerror(saved));
    }
    DIR *dir = act_opendir_at(users->dirfd, ".");
    if (!dir) {
        int saved = errno;
        ad_dynamic_users_free(users);
        return act_error_set(err, saved, "cannot list %s/: %s", DIRECTORY, strerror(saved));
    }
    /* Dot entries are what a write of RECORDS cut short left. Anything
     * else is not ours to skip: it may stand for a uid that must not be
     * given to another host. */
    int r = 0;
    struct dirent *de;
    while (r == 0 && (de = readdir(dir)))
        if (strcmp(de->d_name, RECORDS) == 0)
            r = read_records(users, err);
        else if (de->d_name[0] != '.')
            r = act_error_set(err, EINVAL,
                              "%s/%s is not the records file; dynamic users are recorded only "
                              "as \"<uid> <host>\" lines of %s/%s: move what it stands for "
                              "there, or remove it",
                              DIRECTORY, de->d_name, DIRECTORY, RECORDS);
    closedir(dir);
    if (r < 0) {
        ad_dynamic_users_free(users);
        return r;
    }
    *out = users;
    return 0;
}

/* Whether the user or group database has uid (as a uid or a gid): those
 * belong to someone else. */
static bool known_to_the_system(const ad_dynamic_users *users, uint32_t uid)
{
    return ad_system_ids_known(users->system, uid);
}

int ad_dynamic_users_read_system(ad_dynamic_users *users, act_error *err)
{
    ad_system_ids *ids = NULL;
    int r = ad_system_ids_read(NULL, &ids, err);
    ad_system_ids_free(users->system);
    users->system = ids; /* NULL on failure: an old list may miss an account */
    return r;
}

void ad_dynamic_users_defer_sync(ad_dynamic_users *users)
{
    users->defer_sync = true;
}

static int compare_entries(const void *a, const void *b)
{
    uint32_t x = (*(const entry *const *)a)->uid, y = (*(const entry *const *)b)->uid;
    return x < y ? -1 : x > y;
}

/* Replaces RECORDS with every record, by uid, durably: one file for every
 * host rather than an inode each. */
static int write_records(ad_dynamic_users *users, act_error *err)
{
    static const char header[] =
        "# The dynamic users of activatord's hosts: \"<uid> <host>\" lines, written by the\n"
        "# daemon. A line stays while its host's state directory may hold files of the uid.\n";
    _cleanup_free_ const entry **sorted = calloc(users->n ? users->n : 1, sizeof(*sorted));
    _cleanup_free_ char *text = malloc(sizeof(header) + users->n * (11 + ACT_NAME_MAX + 1));
    if (!sorted || !text)
        return act_error_set(err, ENOMEM, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < users->cap; i++)
        if (users->by_host[i].host)
            sorted[k++] = &users->by_host[i];
    qsort(sorted, k, sizeof(*sorted), compare_entries);
    size_t len = sizeof(header) - 1;
    memcpy(text, header, len);
    for (size_t i = 0; i < k; i++)
        len += (size_t)sprintf(text + len, "%" PRIu32 " %s\n", sorted[i]->uid, sorted[i]->host);
    return act_write_atomic(users->dirfd, RECORDS, text, len, 0600, err);
}

int ad_dynamic_users_sync(ad_dynamic_users *users, act_error *err)
{
    users->defer_sync = false;
    if (!users->unsynced)
        return 0;
    int r = write_records(users, err);
    if (r < 0)
        return act_error_prefix(err, "recording the dynamic users in %s/%s", DIRECTORY, RECORDS);
    users->unsynced = false;
    return 0;
}

/* 65534 is nobody's on every distribution, 65535 the 16-bit -1. */
static bool never_dynamic(uint32_t uid)
{
    return uid == 65534 || uid == 65535;
}

static int compare_ids(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static bool excluded(const ad_dynamic_users *users, uint32_t id)
{
    return users->n_excluded &&
           bsearch(&id, users->excluded, users->n_excluded, sizeof(id), compare_ids) != NULL;
}

/* 1 with *id set for a number (User=4000), 0 for a name. */
static int numeric_id(const char *text, uint32_t *id)
{
    size_t len = text ? strlen(text) : 0;
    if (len == 0 || len > 10 || strspn(text, "0123456789") != len)
        return 0;
    unsigned long long value = strtoull(text, NULL, 10);
    if (value >= UINT32_MAX)
        return 0;
    *id = (uint32_t)value;
    return 1;
}

int ad_dynamic_users_exclude_hosts(ad_dynamic_users *users, const cfg_host *hosts, size_t n,
                                   act_error *err)
{
    uint32_t *ids = calloc(2 * n + 1, sizeof(*ids));
    if (!ids)
        return act_error_set(err, ENOMEM, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        k += (size_t)numeric_id(hosts[i].user, &ids[k]);
        k += (size_t)numeric_id(hosts[i].group, &ids[k]);
    }
    qsort(ids, k, sizeof(*ids), compare_ids);
    free(users->excluded);
    users->excluded = ids;
    users->n_excluded = k;
    return 0;
}

uint32_t ad_dynamic_users_uid_of(const ad_dynamic_users *users, const char *host)
{
    const entry *e = find_host(users, host);
    return e ? e->uid : 0;
}

bool ad_dynamic_users_next(const ad_dynamic_users *users, size_t *cursor, uint32_t *uid,
                           const char **host)
{
    for (; *cursor < users->cap; (*cursor)++) {
        const entry *e = &users->by_host[*cursor];
        if (e->host) {
            *uid = e->uid;
            *host = e->host;
            (*cursor)++;
            return true;
        }
    }
    return false;
}

const char *ad_dynamic_users_owner(const ad_dynamic_users *users, uint32_t uid)
{
    const entry *e = find_uid(users, uid);
    return e ? e->host : NULL;
}

/* Takes the record out of the tables, which are rebuilt without it. */
static void drop(ad_dynamic_users *users, entry *stale)
{
    size_t cap = users->cap;
    entry *old = users->by_host;
    free(users->by_uid);
    char *dropped = stale->host;
    stale->host = NULL;
    users->by_host = NULL;
    users->by_uid = NULL;
    users->cap = users->n = 0;
    for (size_t i = 0; i < cap; i++)
        if (old[i].host)
            remember(users, old[i].uid, old[i].host);
    free(old);
    free(dropped);
}

/* Replaces a record that can no longer be used: its line goes with the
 * next write of RECORDS. */
static void forget(ad_dynamic_users *users, entry *stale)
{
    users->unsynced = true;
    drop(users, stale);
}

int ad_dynamic_user_get(ad_dynamic_users *users, const char *host, uid_t *uid, act_error *err)
{
    assert(users && host && uid);
    entry *recorded = find_host(users, host);
    if (recorded) {
        bool in_range = recorded->uid >= users->uid_min && recorded->uid <= users->uid_max;
        if (in_range && !known_to_the_system(users, recorded->uid)) {
            *uid = recorded->uid;
            return 0;
        }
        act_log(LOG_WARNING,
                "host %s: its dynamic uid %" PRIu32 " is %s; giving it another one (its state "
                "directory is handed over to it at the next start)",
                host, recorded->uid,
                in_range ? "in the user or group database now" : "outside DynamicUserRange=");
        forget(users, recorded);
    }

    uint64_t size = (uint64_t)users->uid_max - users->uid_min + 1;
    uint32_t start = users->uid_min + (uint32_t)(hash_name(host) % size);
    for (uint64_t tried = 0; tried < size; tried++) {
        uint32_t candidate = users->uid_min + (uint32_t)((start - users->uid_min + tried) % size);
        if (never_dynamic(candidate) || find_uid(users, candidate) || excluded(users, candidate) ||
            known_to_the_system(users, candidate))
            continue;
        /* Taken in the tables, the reservation; on disk with the next
         * write of RECORDS, before the uid is used. */
        char *copy = strdup(host);
        if (!copy || remember(users, candidate, copy) < 0)
            return act_error_set(err, ENOMEM, "out of memory");
        users->unsynced = true;
        int r = users->defer_sync ? 0 : ad_dynamic_users_sync(users, err);
        if (r < 0) {
            drop(users, find_host(users, host));
            return act_error_prefix(err, "host %s: dynamic uid %" PRIu32, host, candidate);
        }
        *uid = candidate;
        return 0;
    }
    return act_error_set(err, ENOSPC,
                         "host %s: no uid of DynamicUserRange=%" PRIu32 "-%" PRIu32
                         " is free (%zu are given to hosts, the rest are in the user or group "
                         "database); widen DynamicUserRange= or set User= for the host",
                         host, users->uid_min, users->uid_max, users->n);
}
