#include "activator/records/records.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/cleanup_json.h"
#include "common/fileio.h"
#include "common/json_fields.h"

/* Records are small; anything bigger was not written by us. */
#define RECORD_MAX (64 * 1024)

static const char *const phase_names[] = {
    [REC_GEN_STARTING] = "starting",
    [REC_GEN_SERVING] = "serving",
    [REC_GEN_RETIRING] = "retiring",
    [REC_GEN_FROZEN] = "frozen",
};
/* parse_phase reads a phase back by its index in this table. */
static_assert(ARRAY_SIZE(phase_names) == REC_GEN_FROZEN + 1, "a generation phase without a name");

const char *rec_generation_phase_name(rec_generation_phase phase)
{
    return (size_t)phase < ARRAY_SIZE(phase_names) ? phase_names[phase] : "unknown";
}

int rec_open_host(int state_dirfd, const char *host, act_error *err)
{
    int r = act_name_check("host", host, err);
    if (r < 0)
        return r;
    /* Each host runs as a user of its own and must pass through both to
     * reach its state/, but none may list which other hosts there are or
     * read their records: search permission only. */
    if (mkdirat(state_dirfd, "hosts", 0711) < 0 && errno != EEXIST)
        return act_error_set(err, errno, "cannot create hosts/: %s", strerror(errno));
    char path[ACT_NAME_MAX + 32];
    snprintf(path, sizeof(path), "hosts/%s", host);
    if (mkdirat(state_dirfd, path, 0711) < 0 && errno != EEXIST)
        return act_error_set(err, errno, "cannot create %s: %s", path, strerror(errno));
    _cleanup_close_ int fd =
        openat(state_dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return act_error_set(err, errno, "cannot open %s: %s", path, strerror(errno));
    if (mkdirat(fd, "generations", 0755) < 0 && errno != EEXIST)
        return act_error_set(err, errno, "cannot create %s/generations: %s", path,
                             strerror(errno));
    return TAKE_FD(fd);
}

static void add_build(json_object *obj, const rec_build_ref *build)
{
    json_object *b = json_object_new_object();
    json_object_object_add(b, "version", json_object_new_string(build->version));
    json_object_object_add(b, "digest", json_object_new_string(build->digest));
    json_object_object_add(b, "build_digest", json_object_new_string(build->build_digest));
    json_object_object_add(obj, "build", b);
}

static int write_json(int dirfd, const char *name, json_object *obj, act_error *err)
{
    size_t len = 0;
    const char *text = json_object_to_json_string_length(obj, JSON_C_TO_STRING_PLAIN, &len);
    return act_write_atomic(dirfd, name, text, len, 0644, err);
}

/* A generation's record is not made durable: it is for a daemon that dies
 * while the generation lives on, and the page cache keeps it for that one; a
 * power loss ends the generation with it, and the record then names a
 * process that is gone, which recovery proves (its leaf is empty). Its two
 * fsyncs were a millisecond or more of every cold wake. */
static int write_json_volatile(int dirfd, const char *name, json_object *obj, act_error *err)
{
    size_t len = 0;
    const char *text = json_object_to_json_string_length(obj, JSON_C_TO_STRING_PLAIN, &len);
    return act_write_replace(dirfd, name, text, len, 0644, err);
}

/* Strict field readers: a record that lost a field or changed a type is
 * reported with the field's name rather than read as zero. */
static act_json_reader record_reader(const char *prefix, act_error *err)
{
    return (act_json_reader){.prefix = prefix, .quote = true, .errnum = EBADMSG, .err = err};
}

static int get_build(const act_json_reader *rd, json_object *obj, rec_build_ref *build)
{
    json_object *b;
    int r = act_json_get_member(rd, obj, "build", json_type_object, ACT_JSON_REQUIRED, &b);
    if (r == 0)
        r = act_json_get_string(rd, b, "version", ACT_JSON_REQUIRED, build->version,
                                sizeof(build->version));
    if (r == 0)
        r = act_json_get_string(rd, b, "digest", ACT_JSON_REQUIRED, build->digest,
                                sizeof(build->digest));
    if (r == 0)
        r = act_json_get_string(rd, b, "build_digest", ACT_JSON_REQUIRED, build->build_digest,
                                sizeof(build->build_digest));
    return r;
}

static int read_json(int dirfd, const char *name, const char *where, json_object **out,
                     act_error *err)
{
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = act_read_file(dirfd, name, RECORD_MAX, &text, &len, err);
    if (r < 0)
        return r;
    enum json_tokener_error parse_error = json_tokener_success;
    _cleanup_(json_object_putp) json_object *obj = json_tokener_parse_verbose(text, &parse_error);
    if (!obj || !json_object_is_type(obj, json_type_object))
        return act_error_set(err, EBADMSG, "%snot a JSON object (%s)", where,
                             json_tokener_error_desc(parse_error));
    *out = TAKE_PTR(obj);
    return 0;
}

static void generation_file(uint64_t generation, char *out, size_t out_size)
{
    snprintf(out, out_size, "generations/%" PRIu64 ".json", generation);
}

int rec_write_generation(int host_dirfd, const rec_generation_record *record, act_error *err)
{
    assert(record);
    _cleanup_(json_object_putp) json_object *obj = json_object_new_object();
    json_object_object_add(obj, "host", json_object_new_string(record->host));
    json_object_object_add(obj, "generation", json_object_new_uint64(record->generation));
    json_object_object_add(obj, "session", json_object_new_uint64(record->session));
    json_object_object_add(obj, "admission_revision",
                           json_object_new_uint64(record->admission_revision));
    json_object_object_add(obj, "incarnation", json_object_new_string(record->incarnation));
    add_build(obj, &record->build);
    json_object_object_add(obj, "phase",
                           json_object_new_string(rec_generation_phase_name(record->phase)));
    json_object_object_add(obj, "pid", json_object_new_int(record->pid));
    json_object_object_add(obj, "started_usec", json_object_new_uint64(record->started_usec));
    if (record->replica_pid > 0)
        json_object_object_add(obj, "replica_pid", json_object_new_int(record->replica_pid));

    _cleanup_close_ int dirfd =
        openat(host_dirfd, "generations", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (dirfd < 0)
        return act_error_set(err, errno, "host %s: cannot open generations/: %s", record->host,
                             strerror(errno));
    char name[64];
    snprintf(name, sizeof(name), "%" PRIu64 ".json", record->generation);
    return write_json_volatile(dirfd, name, obj, err);
}

static int parse_phase(const char *text, rec_generation_phase *out)
{
    for (size_t i = 0; i < ARRAY_SIZE(phase_names); i++) {
        if (strcmp(text, phase_names[i]) == 0) {
            *out = (rec_generation_phase)i;
            return 0;
        }
    }
    return -EBADMSG;
}

int rec_read_generation(int host_dirfd, const char *host, uint64_t generation,
                        rec_generation_record *out, act_error *err)
{
    assert(host);
    assert(out);
    char name[64], where[160];
    generation_file(generation, name, sizeof(name));
    snprintf(where, sizeof(where), "host %s: generation record %s: ", host, name);
    act_json_reader rd = record_reader(where, err);
    _cleanup_(json_object_putp) json_object *obj = NULL;
    int r = read_json(host_dirfd, name, where, &obj, err);
    if (r < 0)
        return r;

    rec_generation_record record = {0};
    char phase[16];
    json_object *pid;
    r = act_json_get_string(&rd, obj, "host", ACT_JSON_REQUIRED, record.host, sizeof(record.host));
    if (r == 0)
        r = act_json_get_u64(&rd, obj, "generation", ACT_JSON_REQUIRED, &record.generation);
    if (r == 0)
        r = act_json_get_u64(&rd, obj, "session", ACT_JSON_REQUIRED, &record.session);
    if (r == 0)
        r = act_json_get_u64(&rd, obj, "admission_revision", ACT_JSON_REQUIRED,
                             &record.admission_revision);
    if (r == 0)
        r = act_json_get_string(&rd, obj, "incarnation", ACT_JSON_REQUIRED, record.incarnation,
                                sizeof(record.incarnation));
    if (r == 0)
        r = get_build(&rd, obj, &record.build);
    if (r == 0)
        r = act_json_get_string(&rd, obj, "phase", ACT_JSON_REQUIRED, phase, sizeof(phase));
    if (r == 0 && parse_phase(phase, &record.phase) < 0)
        r = act_error_set(err, EBADMSG, "%sunknown phase \"%s\"", where, phase);
    if (r == 0)
        r = act_json_get_member(&rd, obj, "pid", json_type_int, ACT_JSON_REQUIRED, &pid);
    if (r == 0)
        r = act_json_get_u64(&rd, obj, "started_usec", ACT_JSON_REQUIRED, &record.started_usec);
    json_object *replica_pid = NULL;
    if (r == 0)
        r = act_json_get_member(&rd, obj, "replica_pid", json_type_int, ACT_JSON_OPTIONAL,
                                &replica_pid);
    if (r < 0)
        return r;
    record.pid = json_object_get_int(pid);
    record.replica_pid = replica_pid ? json_object_get_int(replica_pid) : 0;
    /* A record under another host's directory, or naming another number than
     * its file, was moved by hand; trusting it could retire the wrong process. */
    if (strcmp(record.host, host) != 0 || record.generation != generation)
        return act_error_set(err, EBADMSG, "%snames host %s generation %" PRIu64, where,
                             record.host, record.generation);
    *out = record;
    return 0;
}

int rec_remove_generation(int host_dirfd, uint64_t generation, act_error *err)
{
    char name[64];
    generation_file(generation, name, sizeof(name));
    if (unlinkat(host_dirfd, name, 0) < 0 && errno != ENOENT)
        return act_error_set(err, errno, "cannot remove %s: %s", name, strerror(errno));
    return 0;
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Only "<digits>.json" names a record; temp files and strays are skipped. */
static bool parse_record_name(const char *name, uint64_t *generation)
{
    char *end = NULL;
    if (name[0] < '0' || name[0] > '9')
        return false;
    errno = 0;
    unsigned long long value = strtoull(name, &end, 10);
    if (errno || strcmp(end, ".json") != 0)
        return false;
    *generation = value;
    return true;
}

int rec_list_generations(int host_dirfd, uint64_t **out, size_t *count, act_error *err)
{
    assert(out);
    assert(count);
    _cleanup_(closedirp) DIR *dir = act_opendir_at(host_dirfd, "generations");
    if (!dir)
        return act_error_set(err, errno, "cannot list generations/: %s", strerror(errno));
    _cleanup_free_ uint64_t *numbers = NULL;
    size_t used = 0, cap = 0;
    struct dirent *entry;
    while ((entry = readdir(dir))) {
        uint64_t generation;
        if (!parse_record_name(entry->d_name, &generation))
            continue;
        if (used == cap) {
            cap = cap ? cap * 2 : 8;
            uint64_t *grown = realloc(numbers, cap * sizeof(*numbers));
            if (!grown)
                return act_error_set(err, ENOMEM, "out of memory listing generations");
            numbers = grown;
        }
        numbers[used++] = generation;
    }
    if (used)
        qsort(numbers, used, sizeof(*numbers), compare_u64);
    *out = TAKE_PTR(numbers);
    *count = used;
    return 0;
}

int rec_write_build_state(int host_dirfd, const rec_build_state *state, act_error *err)
{
    assert(state);
    _cleanup_(json_object_putp) json_object *obj = json_object_new_object();
    add_build(obj, &state->build);
    json_object_object_add(obj, "generation", json_object_new_uint64(state->generation));
    json_object_object_add(obj, "session", json_object_new_uint64(state->session));
    json_object_object_add(obj, "written_usec", json_object_new_uint64(state->written_usec));
    return write_json(host_dirfd, "build-state.json", obj, err);
}

bool rec_build_ref_equal(const rec_build_ref *a, const rec_build_ref *b)
{
    assert(a);
    assert(b);
    return strcmp(a->version, b->version) == 0 && strcmp(a->digest, b->digest) == 0 &&
           strcmp(a->build_digest, b->build_digest) == 0;
}

int rec_note_build_state(int host_dirfd, const char *host, const rec_build_state *state,
                         act_error *err)
{
    assert(host);
    assert(state);
    rec_build_state recorded;
    act_error ignored = {0};
    if (rec_read_build_state(host_dirfd, host, &recorded, &ignored) == 0 &&
        rec_build_ref_equal(&recorded.build, &state->build))
        return 0;
    int r = rec_write_build_state(host_dirfd, state, err);
    return r < 0 ? r : 1;
}

int rec_read_build_state(int host_dirfd, const char *host, rec_build_state *out, act_error *err)
{
    assert(host);
    assert(out);
    char where[128];
    snprintf(where, sizeof(where), "host %s: build-state.json: ", host);
    act_json_reader rd = record_reader(where, err);
    _cleanup_(json_object_putp) json_object *obj = NULL;
    int r = read_json(host_dirfd, "build-state.json", where, &obj, err);
    if (r < 0)
        return r;
    rec_build_state state = {0};
    r = get_build(&rd, obj, &state.build);
    if (r == 0)
        r = act_json_get_u64(&rd, obj, "generation", ACT_JSON_REQUIRED, &state.generation);
    if (r == 0)
        r = act_json_get_u64(&rd, obj, "session", ACT_JSON_REQUIRED, &state.session);
    if (r == 0)
        r = act_json_get_u64(&rd, obj, "written_usec", ACT_JSON_REQUIRED, &state.written_usec);
    if (r == 0)
        *out = state;
    return r;
}

int rec_read_checkpoint(int host_dirfd, const char *host, char *out, size_t out_size,
                        act_error *err)
{
    assert(host);
    assert(out);
    assert(out_size > 0);
    char where[128];
    snprintf(where, sizeof(where), "host %s: checkpoint.json: ", host);
    act_json_reader rd = record_reader(where, err);
    _cleanup_(json_object_putp) json_object *obj = NULL;
    int r = read_json(host_dirfd, "checkpoint.json", where, &obj, err);
    if (r == -ENOENT) {
        out[0] = '\0';
        act_error_clear(err);
        return 0;
    }
    if (r < 0)
        return r;
    return act_json_get_string(&rd, obj, "checkpoint", ACT_JSON_REQUIRED, out, out_size);
}

int rec_write_checkpoint(int host_dirfd, const char *checkpoint, act_error *err)
{
    assert(checkpoint);
    _cleanup_(json_object_putp) json_object *obj = json_object_new_object();
    json_object_object_add(obj, "checkpoint", json_object_new_string(checkpoint));
    return write_json(host_dirfd, "checkpoint.json", obj, err);
}

int rec_read_probe(int host_dirfd, const char *host, rec_probe *out, act_error *err)
{
    assert(host);
    assert(out);
    char where[128];
    snprintf(where, sizeof(where), "host %s: probe.json: ", host);
    act_json_reader rd = record_reader(where, err);
    _cleanup_(json_object_putp) json_object *obj = NULL;
    int r = read_json(host_dirfd, "probe.json", where, &obj, err);
    if (r == -ENOENT) {
        act_error_clear(err);
        return 0;
    }
    rec_probe probe = {0};
    if (r == 0)
        r = act_json_get_string(&rd, obj, "op", ACT_JSON_REQUIRED, probe.op_id,
                                sizeof(probe.op_id));
    if (r == 0)
        r = act_json_get_u64(&rd, obj, "deadline_usec", ACT_JSON_REQUIRED, &probe.deadline_usec);
    if (r < 0)
        return r;
    *out = probe;
    return 1;
}

int rec_write_probe(int host_dirfd, const rec_probe *probe, act_error *err)
{
    assert(probe);
    _cleanup_(json_object_putp) json_object *obj = json_object_new_object();
    json_object_object_add(obj, "op", json_object_new_string(probe->op_id));
    json_object_object_add(obj, "deadline_usec", json_object_new_uint64(probe->deadline_usec));
    return write_json(host_dirfd, "probe.json", obj, err);
}

int rec_remove_probe(int host_dirfd, act_error *err)
{
    if (unlinkat(host_dirfd, "probe.json", 0) < 0 && errno != ENOENT)
        return act_error_set(err, errno, "cannot remove probe.json: %s", strerror(errno));
    return 0;
}
