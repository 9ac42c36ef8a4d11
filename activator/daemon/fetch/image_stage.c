/* An image staged as a build (fetch/image_stage.h). */
#include "activator/daemon/fetch/image_stage.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "claims/claims.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/names.h"
#include "common/strv.h"
#include "image/image.h"

#define IMAGE_WORK_PREFIX ".image-"

bool ad_image_is_source(const char *source)
{
    return img_is_reference(source) || img_is_registry_reference(source);
}

/* The work directories a stage of host left behind when the daemon died
 * under it. Stages and fetches of one host run one at a time (its lane on
 * the release workers), so none of them is in use. */
static void sweep_image_work(const ad_image_stage *in)
{
    DIR *dir = opendir(in->work_dir);
    if (!dir)
        return;
    char prefix[ACT_NAME_MAX + 16];
    snprintf(prefix, sizeof(prefix), IMAGE_WORK_PREFIX "%s-", in->host);
    struct dirent *de;
    /* The prefix and mkdtemp's six characters, nothing more: host "web"
     * must not take ".image-web-2-ABCDEF", host web-2's, maybe in use. */
    size_t name_len = strlen(prefix) + 6;
    while ((de = readdir(dir))) {
        if (strncmp(de->d_name, prefix, strlen(prefix)) != 0 || strlen(de->d_name) != name_len)
            continue;
        char path[8192];
        snprintf(path, sizeof(path), "%s/%s", in->work_dir, de->d_name);
        (void)img_remove_tree(path);
    }
    closedir(dir);
}

/* A registry's image pulled into the layout <work>/layout; the reference
 * to open it by into local, and the source it came from into source. */
static int pull_image(const ad_image_stage *in, const char *work, char *local, size_t local_size,
                      char *source, size_t source_size, act_error *err)
{
    char layout[8300];
    snprintf(layout, sizeof(layout), "%s/layout", work);
    img_registry_options options = {
        .auth_file =
            in->registry_auth_file && in->registry_auth_file[0] ? in->registry_auth_file : NULL,
        .insecure = in->registry_insecure,
        .n_insecure = act_strv_length((char *const *)in->registry_insecure),
        .progress = in->progress,
    };
    int r = img_pull(in->reference, &options, layout, source, source_size, err);
    if (r == 0)
        snprintf(local, local_size, "oci:%s:" IMG_PULLED_TAG, layout);
    return r;
}

int ad_image_stage_run(rel_store *releases, const ad_image_stage *in, rel_identity *out,
                       act_error *err)
{
    sweep_image_work(in);
    char work[8192];
    snprintf(work, sizeof(work), "%s/" IMAGE_WORK_PREFIX "%s-XXXXXX", in->work_dir, in->host);
    if (!mkdtemp(work))
        return act_error_set(err, errno,
                             "host %s: version %s: cannot make a work directory in %s for the "
                             "image: %s; nothing was staged",
                             in->host, in->version, in->work_dir, strerror(errno));
    char local[8400], source[1024] = "", tree[8300];
    snprintf(local, sizeof(local), "%s", in->reference);
    snprintf(tree, sizeof(tree), "%s/tree", work);
    int r = img_is_registry_reference(in->reference)
                ? pull_image(in, work, local, sizeof(local), source, sizeof(source), err)
                : 0;
    _cleanup_(img_image_clear) img_image image = {0};
    if (r == 0)
        r = img_open(local, &image, err);
    if (r == 0 && !source[0])
        img_source(&image, source, sizeof(source));
    if (r == 0 && mkdir(tree, 0700) < 0)
        r = act_error_set(err, errno, "cannot make %s: %s", tree, strerror(errno));
    if (r == 0)
        r = img_flatten(&image, tree, err);
    if (r < 0)
        act_error_prefix(err, "host %s: version %s: nothing was staged", in->host, in->version);
    else
        r = rel_stage_expecting(releases, in->host, in->version, tree, in->executable, source,
                                in->expected_digest, out, err);
    int removed = img_remove_tree(work);
    if (removed < 0)
        act_log(LOG_WARNING,
                "host %s: cannot remove the image work directory %s: %s; the next "
                "stage of the host removes it",
                in->host, work, strerror(-removed));
    return r;
}

void ad_image_claim_source(const rel_identity *identity, char *out, size_t size)
{
    const char *source = identity->source;
    out[0] = '\0';
    /* img_pull records the reference resolved to the manifest's digest;
     * one too long for a claim is left out (the pin then has no source,
     * and a box without the build says so). */
    if (img_is_registry_reference(source) && strstr(source, "@sha256:") &&
        strlen(source) < CLAIM_SOURCE_SIZE && strlen(source) < size)
        snprintf(out, size, "%s", source);
}
