/* The move of a dir store from layout 2, one JSON file per claim
 * ("<host>.json": {"revision":N,"claim":{...}} or {"revision":N,
 * "deleted":true}), to claim files (claim_slots.h), made by the first layout
 * check under the lock. Each claim keeps its revision and its exact body.
 * A claim file is made durably before its JSON file is removed, so a crash
 * at any point leaves every claim in one of the two, and the next check
 * makes the claim file again from the JSON file that is still there. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "claims/store_dir.h"
#include "common/cleanup.h"
#include "common/cleanup_json.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/names.h"

#define LEGACY_SUFFIX ".json"
#define LEGACY_MAX (CLAIM_JSON_MAX + 256)

/* Moves dir/<host>.json into dir/<host>.claim. A file that holds no
 * revision is left where it is, with a warning: it held no claim a store
 * could read before either. */
static int migrate_one(dir_store *ds, const char *host, const char *name, act_error *err)
{
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    act_error why = {0};
    int r = act_read_file(ds->dirfd, name, LEGACY_MAX, &text, &len, &why);
    if (r < 0)
        return act_error_set(err, -r,
                             "claim store %s: cannot read %s to move it into %s" DIR_CLAIM_SUFFIX
                             ": %s; fix or remove it and start again",
                             ds->path, name, host, why.message);
    _cleanup_(json_object_putp) json_object *root = json_tokener_parse(text);
    json_object *revision = NULL, *body = NULL, *deleted = NULL;
    if (!root || !json_object_object_get_ex(root, "revision", &revision) ||
        !json_object_is_type(revision, json_type_int) || json_object_get_int64(revision) <= 0) {
        act_log(LOG_WARNING,
                "claim store %s: %s has no revision and is not moved into a claim file; host "
                "%s has no claim until one is written",
                ds->path, name, host);
        return 0;
    }
    const char *payload = NULL;
    size_t payload_len = 0;
    bool is_tombstone =
        json_object_object_get_ex(root, "deleted", &deleted) && json_object_get_boolean(deleted);
    if (!is_tombstone) {
        /* The body as it was, even a malformed one: its revision stays
         * known, so a CAS naming it can repair it, as before. */
        payload = json_object_object_get_ex(root, "claim", &body)
                      ? json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN)
                      : "{}";
        payload_len = strlen(payload);
    }
    r = dir_create_claim_file(ds, host, json_object_get_uint64(revision), payload, payload_len,
                              err);
    if (r < 0)
        return r;
    if (unlinkat(ds->dirfd, name, 0) < 0 && errno != ENOENT)
        return act_error_set(err, errno, "claim store %s: cannot remove %s once moved: %m",
                             ds->path, name);
    return 0;
}

int dir_migrate_json_claims_locked(dir_store *ds, act_error *err)
{
    _cleanup_(closedirp) DIR *dir = act_opendir_at(ds->dirfd, ".");
    if (!dir)
        return act_error_set(err, errno, "claim store %s: cannot list: %m", ds->path);
    unsigned moved = 0;
    struct dirent *entry;
    while ((entry = readdir(dir))) {
        char host[ACT_NAME_MAX + 1];
        if (!dir_host_file_name(entry->d_name, LEGACY_SUFFIX, host, sizeof(host)))
            continue;
        int r = migrate_one(ds, host, entry->d_name, err);
        if (r < 0)
            return r;
        moved++;
    }
    act_error why = {0};
    if (moved && act_fsync_dir(ds->dirfd, &why) < 0)
        return act_error_set(err, why.errnum, "claim store %s: %s", ds->path, why.message);
    if (moved)
        act_log(LOG_NOTICE,
                "claim store %s: %u claims moved from JSON files into claim files "
                "(layout %d)",
                ds->path, moved, DIR_LAYOUT);
    return 0;
}
