/* Opening a claim store: the URL picks the backend (dir:// or etcd://),
 * and the options' zeros take their defaults. */
#include <assert.h>
#include <errno.h>

#include "claims/store_internal.h"

#define DEFAULT_TIMEOUT_MS 5000
#define DEFAULT_WATCH_TIMEOUT_MS 30000

int claims_store_open(const char *url, const claims_store_options *options, claim_store **out,
                      act_error *err)
{
    assert(out);
    claims_store_options defaults = {0};
    if (!options)
        options = &defaults;
    if (options->timeout_ms < 0 || options->watch_timeout_ms < 0)
        return act_error_set(err, EINVAL, "claim store: timeout %d ms is negative",
                             options->timeout_ms < 0 ? options->timeout_ms
                                                     : options->watch_timeout_ms);
    claims_store_options effective = *options;
    if (effective.timeout_ms == 0)
        effective.timeout_ms = DEFAULT_TIMEOUT_MS;
    if (effective.watch_timeout_ms == 0)
        effective.watch_timeout_ms = DEFAULT_WATCH_TIMEOUT_MS;
    if (!url)
        return act_error_set(err, EINVAL, "claim store URL is missing; use dir:///path or "
                                          "etcd://host:port/prefix");
    claims_url parsed;
    int r = claims_parse_url(url, &parsed, err);
    if (r < 0)
        return r;
    if (parsed.kind == CLAIMS_URL_DIR)
        r = claims_dir_open(parsed.path, &effective, out, err);
    else
        r = claims_etcd_open(&parsed, &effective, out, err);
    if (r < 0)
        return r;
    (*out)->timeout_ms = effective.timeout_ms;
    (*out)->watch_timeout_ms = effective.watch_timeout_ms;
    (*out)->list_page_keys = effective.list_page_keys > 0 ? effective.list_page_keys : 256;
    (*out)->between_pages = effective.between_pages;
    (*out)->between_pages_userdata = effective.between_pages_userdata;
    (*out)->before_silence_probe = effective.before_silence_probe;
    (*out)->before_silence_probe_userdata = effective.before_silence_probe_userdata;
    return 0;
}
