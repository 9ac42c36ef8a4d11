#include "activator/daemon/box/lifetime.h"

#include <assert.h>
#include <json-c/json.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/cleanup_json.h"
#include "common/clock.h"
#include "common/fileio.h"
#include "common/json_fields.h"
#include "common/log.h"

#define LIFETIME_FILE "daemon.json"

static void read_record(const ad_daemon *daemon, ad_lifetime *out)
{
    *out = (ad_lifetime){0};
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    if (act_read_file(daemon->state_dirfd, LIFETIME_FILE, 4096, &text, &len, NULL) < 0)
        return;
    _cleanup_(json_object_putp) json_object *obj = json_tokener_parse(text);
    if (!obj || !json_object_is_type(obj, json_type_object))
        return;
    out->starts = act_json_u64_or(obj, "starts", 0);
    out->last_handover_usec = act_json_u64_or(obj, "last_handover_usec", 0);
    out->handovers = act_json_u64_or(obj, "handovers", 0);
}

static void write_record(const ad_daemon *daemon, const ad_lifetime *lifetime)
{
    _cleanup_(json_object_putp) json_object *obj = json_object_new_object();
    json_object_object_add(obj, "starts", json_object_new_uint64(lifetime->starts));
    json_object_object_add(obj, "started_usec", json_object_new_uint64(lifetime->started_usec));
    json_object_object_add(obj, "last_handover_usec",
                           json_object_new_uint64(lifetime->last_handover_usec));
    json_object_object_add(obj, "handovers", json_object_new_uint64(lifetime->handovers));
    const char *text = json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN);
    act_error err = {0};
    if (act_write_atomic(daemon->state_dirfd, LIFETIME_FILE, text, strlen(text), 0644, &err) < 0)
        act_log(LOG_WARNING, "cannot record the daemon's start in %s: %s", LIFETIME_FILE,
                err.message);
}

void ad_lifetime_start(ad_daemon *daemon, ad_lifetime *out)
{
    assert(daemon && out);
    read_record(daemon, out);
    out->starts++;
    out->started_usec = act_wallclock_usec();
    write_record(daemon, out);
}

void ad_lifetime_handover(ad_daemon *daemon, ad_lifetime *lifetime)
{
    assert(daemon && lifetime);
    lifetime->handovers++;
    lifetime->last_handover_usec = act_wallclock_usec();
    write_record(daemon, lifetime);
}
