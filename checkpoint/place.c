/* Where Checkpoints= keeps them (checkpoint.h): a directory, or a
 * registry's namespace (checkpoint/registry.c); each ckpt_place_* call goes
 * to the one the place names. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/internal.h"
#include "common/strv.h"
#include "common/text.h"
#include "image/image.h"
#include "image/internal.h"

#define DOCKER_SCHEME "docker://"

/* docker://REGISTRY/NAMESPACE: a registry and a repository path, without a
 * tag or a digest (each host's repository goes under it). */
static int check_namespace(const char *url, act_error *err)
{
    char shown[ACT_TEXT_SHOW_MAX];
    act_text_show(url, shown, sizeof(shown));
    const char *rest = url + strlen(DOCKER_SCHEME);
    const char *slash = strchr(rest, '/');
    const char *last = strrchr(rest, '/');
    if (!slash || strchr(rest, '@') || (last && strchr(last, ':')))
        return act_error_set(err, EINVAL,
                             "\"%s\" is not a checkpoint namespace (write "
                             "docker://REGISTRY/NAMESPACE, without a tag or a digest: each "
                             "host's checkpoints go to NAMESPACE/HOST, tagged by their ids)",
                             shown);
    /* As a host's repository would be: the registry and the path checked
     * by the image library's parser. */
    char probe[1200];
    snprintf(probe, sizeof(probe), "%s/probe", url);
    img_registry_ref ref;
    act_error why = {0};
    if (img_parse_registry_reference(probe, &ref, &why) < 0)
        return act_error_set(err, EINVAL, "\"%s\" is not a checkpoint namespace: %s", shown,
                             why.message);
    return 0;
}

int ckpt_place_parse(const char *url, ckpt_place *out, act_error *err)
{
    *out = (ckpt_place){0};
    if (url && strncmp(url, DOCKER_SCHEME, strlen(DOCKER_SCHEME)) == 0) {
        size_t len = strlen(url);
        while (len > strlen(DOCKER_SCHEME) && url[len - 1] == '/')
            len--;
        out->namespace = strndup(url, len);
        if (!out->namespace)
            return act_error_set(err, ENOMEM, "out of memory");
        int r = check_namespace(out->namespace, err);
        if (r < 0)
            ckpt_place_clear(out);
        return r;
    }
    return ckpt_parse_url(url, &out->dir, err);
}

int ckpt_place_set_registry(ckpt_place *out, const char *spool, const char *auth_file,
                            char *const *insecure, act_error *err)
{
    out->spool = strdup(spool);
    out->auth_file = auth_file ? strdup(auth_file) : NULL;
    out->insecure = act_strv_copy(insecure);
    if (!out->spool || (auth_file && !out->auth_file) || (insecure && !out->insecure))
        return act_error_set(err, ENOMEM, "out of memory");
    return 0;
}

void ckpt_place_clear(ckpt_place *place)
{
    if (!place)
        return;
    free(place->dir);
    free(place->namespace);
    free(place->spool);
    free(place->auth_file);
    act_strv_free(place->insecure);
    *place = (ckpt_place){0};
}

int ckpt_place_write(const ckpt_place *place, const char *host, const char *state_dir,
                     uint64_t generation, const char *box, const atomic_bool *cancel,
                     ckpt_info *out, act_error *err)
{
    if (place->namespace)
        return ckpt_registry_write(place, host, state_dir, generation, box, cancel, out, err);
    return ckpt_write(place->dir, host, state_dir, generation, box, cancel, out, err);
}

int ckpt_place_list(const ckpt_place *place, const char *host, ckpt_info **out, size_t *n,
                    act_error *err)
{
    if (place->namespace)
        return ckpt_registry_list(place, host, out, n, NULL, err);
    return ckpt_list(place->dir, host, out, n, err);
}

int ckpt_place_prune(const ckpt_place *place, const char *host, unsigned keep,
                     const char *const *protected, size_t n_protected, act_error *err)
{
    if (place->namespace)
        return ckpt_registry_prune(place, host, keep, protected, n_protected, err);
    return ckpt_prune(place->dir, host, keep, protected, n_protected, err);
}

int ckpt_place_restore(const ckpt_place *place, const char *host, const char *id,
                       const char *sha256, const char *state_dir, uid_t uid, gid_t gid,
                       act_error *err)
{
    if (place->namespace)
        return ckpt_registry_restore(place, host, id, sha256, state_dir, uid, gid, err);
    return ckpt_restore(place->dir, host, id, sha256, state_dir, uid, gid, err);
}
