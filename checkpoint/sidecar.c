/* <id>.json: what a checkpoint is, beside its archive, so a listing need
 * not hash every archive again. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/internal.h"
#include "common/cleanup_json.h"
#include "common/fileio.h"
#include "common/json_fields.h"

#define SIDECAR_MAX 4096

int ckpt_write_sidecar(int host_dirfd, const ckpt_info *info, act_error *err)
{
    _cleanup_(json_object_putp) json_object *root = json_object_new_object();
    if (!root)
        return act_error_set(err, ENOMEM, "out of memory");
    json_object_object_add(root, "id", json_object_new_string(info->id));
    json_object_object_add(root, "sha256", json_object_new_string(info->sha256));
    json_object_object_add(root, "size", json_object_new_uint64(info->size));
    json_object_object_add(root, "generation", json_object_new_uint64(info->generation));
    json_object_object_add(root, "box", json_object_new_string(info->box));
    json_object_object_add(root, "stamp_usec", json_object_new_uint64(info->stamp_usec));
    const char *text = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN);
    char name[CKPT_ID_SIZE + sizeof(CKPT_SIDECAR_SUFFIX)];
    snprintf(name, sizeof(name), "%s%s", info->id, CKPT_SIDECAR_SUFFIX);
    return act_write_atomic(host_dirfd, name, text, strlen(text), 0600, err);
}

/* Only what is well formed is taken: a sidecar is a convenience, the
 * archive and the claim's digest are what a restore trusts. */
int ckpt_read_sidecar(int host_dirfd, const char *id, ckpt_info *info, act_error *err)
{
    char name[CKPT_ID_SIZE + sizeof(CKPT_SIDECAR_SUFFIX)];
    snprintf(name, sizeof(name), "%s%s", id, CKPT_SIDECAR_SUFFIX);
    _cleanup_free_ char *text = NULL;
    int r = act_read_file(host_dirfd, name, SIDECAR_MAX, &text, NULL, err);
    if (r < 0)
        return r;
    _cleanup_(json_object_putp) json_object *root = json_tokener_parse(text);
    if (!root || !json_object_is_type(root, json_type_object))
        return act_error_set(err, EINVAL, "checkpoint %s: %s is not JSON", id, name);
    const char *sha256 = act_json_string_or(root, "sha256", "");
    if (strlen(sha256) == CKPT_DIGEST_SIZE - 1 &&
        strspn(sha256, "0123456789abcdef") == CKPT_DIGEST_SIZE - 1)
        memcpy(info->sha256, sha256, CKPT_DIGEST_SIZE);
    const char *box = act_json_string_or(root, "box", "");
    if (act_name_is_valid(box))
        snprintf(info->box, sizeof(info->box), "%s", box);
    info->generation = act_json_u64_or(root, "generation", 0);
    info->stamp_usec = act_json_u64_or(root, "stamp_usec", 0);
    return 0;
}
