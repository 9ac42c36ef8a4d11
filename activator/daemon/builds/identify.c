/* A staged version's identity, from the manifest (builds/identify.h). */
#include "activator/daemon/builds/identify.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "activator/daemon/fetch/image_stage.h"
#include "common/cleanup.h"

int ad_build_identify(rel_store *releases, const char *host, const char *version, rel_pin *pin,
                      char source[CLAIM_SOURCE_SIZE], const char **code, act_error *err)
{
    _cleanup_free_ rel_entry *entries = NULL;
    size_t n = 0;
    *code = "not_staged";
    int r = rel_list(releases, host, &entries, &n, err);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(entries[i].identity.version, version) != 0)
            continue;
        snprintf(pin->version, sizeof(pin->version), "%s", version);
        snprintf(pin->digest, sizeof(pin->digest), "%s", entries[i].identity.build_digest);
        ad_image_claim_source(&entries[i].identity, source, CLAIM_SOURCE_SIZE);
        if (entries[i].manifest_ok)
            return 0;
        *code = "digest_mismatch";
        return act_error_set(err, EBADMSG, "host %s: version %s: %s", host, version,
                             entries[i].problem);
    }
    return act_error_set(err, ENOENT,
                         "host %s: version %s is not staged; stage it with 'activatorctl stage %s "
                         "%s PATH'",
                         host, version, host, version);
}
