/* manifest.json: what a staged build is. It is read from disk on every
 * resolve, so it is treated as outside input: bounded in size, parsed
 * strictly, and every field checked before anything uses it. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/cleanup_json.h"
#include "common/fileio.h"
#include "release/internal.h"

#define MANIFEST_FORMAT 1

void rel_manifest_clear(rel_manifest *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_files; i++)
        free(m->files[i].path);
    free(m->files);
    memset(m, 0, sizeof(*m));
}

static int file_cmp(const void *a, const void *b)
{
    return strcmp(((const rel_file *)a)->path, ((const rel_file *)b)->path);
}

const rel_file *rel_manifest_find(const rel_manifest *m, const char *path)
{
    assert(m);
    assert(path);
    rel_file key = {.path = (char *)path};
    return bsearch(&key, m->files, m->n_files, sizeof(rel_file), file_cmp);
}

void rel_manifest_identity(const rel_manifest *m, const rel_file *exec, rel_identity *id)
{
    assert(m);
    assert(id);
    memset(id, 0, sizeof(*id));
    if (!exec)
        exec = rel_manifest_find(m, m->exec_path);
    snprintf(id->version, sizeof(id->version), "%s", m->version);
    snprintf(id->build_digest, sizeof(id->build_digest), "%s", m->build_digest);
    id->staged_at = m->staged_at;
    for (size_t i = 0; i < m->n_files; i++)
        id->size += m->files[i].size;
    if (exec) {
        snprintf(id->exec_path, sizeof(id->exec_path), "%s", exec->path);
        snprintf(id->digest, sizeof(id->digest), "%s", exec->digest);
        id->exec_size = exec->size;
    }
}

int rel_manifest_write(int dirfd, const rel_manifest *m, act_error *err)
{
    assert(m);
    _cleanup_(json_object_putp) json_object *root = json_object_new_object();
    _cleanup_(json_object_putp) json_object *files = json_object_new_array_ext((int)m->n_files);
    if (!root || !files)
        return act_error_set(err, ENOMEM, "out of memory writing the manifest");
    json_object_object_add(root, "format", json_object_new_int(MANIFEST_FORMAT));
    json_object_object_add(root, "host", json_object_new_string(m->host));
    json_object_object_add(root, "version", json_object_new_string(m->version));
    json_object_object_add(root, "exec_path", json_object_new_string(m->exec_path));
    json_object_object_add(root, "build_digest", json_object_new_string(m->build_digest));
    json_object_object_add(root, "staged_at", json_object_new_uint64(m->staged_at));
    for (size_t i = 0; i < m->n_files; i++) {
        json_object *f = json_object_new_object();
        if (!f)
            return act_error_set(err, ENOMEM, "out of memory writing the manifest");
        json_object_object_add(f, "path", json_object_new_string(m->files[i].path));
        json_object_object_add(f, "size", json_object_new_uint64(m->files[i].size));
        json_object_object_add(f, "sha256", json_object_new_string(m->files[i].digest));
        json_object_array_add(files, f);
    }
    json_object_object_add(root, "files", TAKE_PTR(files));

    size_t len = 0;
    const char *text = json_object_to_json_string_length(
        root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
    if (!text)
        return act_error_set(err, ENOMEM, "out of memory writing the manifest");
    if (len > REL_MANIFEST_MAX)
        return act_error_set(err, EFBIG,
                             "the manifest would be %zu bytes, over the %u byte limit; the build "
                             "has too many files",
                             len, REL_MANIFEST_MAX);
    return act_write_atomic(dirfd, REL_MANIFEST_NAME, text, len, 0444, err);
}

/* Reads the manifest through an O_NOFOLLOW fd: a manifest that is a symlink
 * could point anywhere and is refused like any other symlink in a build. */
static int read_bounded(int dirfd, const char *where, char **out, size_t *out_len, act_error *err)
{
    _cleanup_close_ int fd =
        openat(dirfd, REL_MANIFEST_NAME, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
    if (fd < 0) {
        if (errno == ELOOP)
            return act_error_set(err, ELOOP,
                                 "manifest %s is a symlink; a build's manifest must "
                                 "be a regular file; restage the version",
                                 where);
        if (errno == ENOENT)
            return act_error_set(err, EUCLEAN,
                                 "manifest %s is missing; the version was not "
                                 "staged by this tool; remove it and stage it again",
                                 where);
        return act_error_set(err, errno, "cannot open manifest %s: %s", where, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) < 0)
        return act_error_set(err, errno, "cannot stat manifest %s: %s", where, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return act_error_set(err, EUCLEAN, "manifest %s is not a regular file", where);
    if (st.st_size > (off_t)REL_MANIFEST_MAX)
        return act_error_set(err, EFBIG,
                             "manifest %s is %lld bytes, over the %u byte limit; it is corrupt or "
                             "not a manifest; restage the version",
                             where, (long long)st.st_size, REL_MANIFEST_MAX);

    size_t cap = (size_t)st.st_size + 1;
    _cleanup_free_ char *buf = malloc(cap + 1);
    if (!buf)
        return act_error_set(err, ENOMEM, "out of memory reading manifest %s", where);
    /* Read one byte more than fstat said, so a file that grew in between is
     * caught as oversized or at least read whole. */
    ssize_t n = act_read_full(fd, buf, cap);
    if (n < 0)
        return act_error_set(err, (int)-n, "cannot read manifest %s: %s", where, strerror((int)-n));
    size_t len = (size_t)n;
    if (len > REL_MANIFEST_MAX)
        return act_error_set(err, EFBIG, "manifest %s is over the %u byte limit", where,
                             REL_MANIFEST_MAX);
    buf[len] = '\0';
    *out = TAKE_PTR(buf);
    *out_len = len;
    return 0;
}

/* Field accessors that name the file and field when the value is missing or
 * of the wrong kind. */
static int get_field(json_object *obj, const char *where, const char *key, const char *field,
                     json_type type, json_object **out, act_error *err)
{
    static const char *const type_names[] = {
        [json_type_null] = "null",        [json_type_boolean] = "a boolean",
        [json_type_double] = "a number",  [json_type_int] = "an integer",
        [json_type_object] = "an object", [json_type_array] = "an array",
        [json_type_string] = "a string",
    };
    static_assert(ARRAY_SIZE(type_names) == json_type_string + 1, "a JSON type without a name");
    json_object *value = NULL;
    if (!json_object_object_get_ex(obj, key, &value) || !value)
        return act_error_set(err, EUCLEAN, "manifest %s: field %s is missing; restage the version",
                             where, field);
    if (!json_object_is_type(value, type))
        return act_error_set(err, EUCLEAN, "manifest %s: field %s must be %s, it is %s", where,
                             field, type_names[type], type_names[json_object_get_type(value)]);
    *out = value;
    return 0;
}

static int get_uint64(json_object *obj, const char *where, const char *key, const char *field,
                      uint64_t *out, act_error *err)
{
    json_object *value = NULL;
    int r = get_field(obj, where, key, field, json_type_int, &value, err);
    if (r < 0)
        return r;
    /* json-c keeps negative integers as int64; anything below zero is not a
     * size or a time stamp. */
    if (json_object_get_int64(value) < 0)
        return act_error_set(err, EUCLEAN, "manifest %s: field %s is negative", where, field);
    *out = json_object_get_uint64(value);
    return 0;
}

static int get_string(json_object *obj, const char *where, const char *key, const char *field,
                      char *out, size_t out_size, act_error *err)
{
    json_object *value = NULL;
    int r = get_field(obj, where, key, field, json_type_string, &value, err);
    if (r < 0)
        return r;
    const char *s = json_object_get_string(value);
    size_t len = (size_t)json_object_get_string_len(value);
    if (len >= out_size || strlen(s) != len)
        return act_error_set(err, EUCLEAN,
                             "manifest %s: field %s is longer than %zu bytes or holds a NUL", where,
                             field, out_size - 1);
    memcpy(out, s, len + 1);
    return 0;
}

static int parse_files(json_object *array, const char *where, rel_manifest *m, act_error *err)
{
    size_t n = json_object_array_length(array);
    if (n == 0)
        return act_error_set(err, EUCLEAN,
                             "manifest %s: field files is empty; a build has at "
                             "least its executable",
                             where);
    m->files = calloc(n, sizeof(rel_file));
    if (!m->files)
        return act_error_set(err, ENOMEM, "out of memory reading manifest %s", where);
    for (size_t i = 0; i < n; i++) {
        json_object *f = json_object_array_get_idx(array, i);
        char field[64];
        if (!json_object_is_type(f, json_type_object))
            return act_error_set(err, EUCLEAN, "manifest %s: field files[%zu] must be an object",
                                 where, i);
        rel_file *file = &m->files[i];
        char path[REL_PATH_SIZE];
        snprintf(field, sizeof(field), "files[%zu].path", i);
        int r = get_string(f, where, "path", field, path, sizeof(path), err);
        if (r < 0)
            return r;
        if (!rel_build_path_is_valid(path) || strcmp(path, REL_MANIFEST_NAME) == 0)
            return act_error_set(err, EUCLEAN,
                                 "manifest %s: field %s is not a valid path inside a build", where,
                                 field);
        file->path = strdup(path);
        if (!file->path)
            return act_error_set(err, ENOMEM, "out of memory reading manifest %s", where);
        m->n_files = i + 1;
        if (i > 0 && strcmp(m->files[i - 1].path, path) >= 0)
            return act_error_set(err, EUCLEAN,
                                 "manifest %s: field %s is out of order or repeated; entries must "
                                 "be sorted by path without duplicates",
                                 where, field);
        snprintf(field, sizeof(field), "files[%zu].size", i);
        r = get_uint64(f, where, "size", field, &file->size, err);
        if (r < 0)
            return r;
        snprintf(field, sizeof(field), "files[%zu].sha256", i);
        r = get_string(f, where, "sha256", field, file->digest, sizeof(file->digest), err);
        if (r < 0)
            return r;
        if (!rel_digest_is_valid(file->digest))
            return act_error_set(err, EUCLEAN,
                                 "manifest %s: field files[%zu].sha256 is not 64 lowercase hex "
                                 "digits",
                                 where, i);
    }
    return 0;
}

int rel_manifest_read(int version_dirfd, const char *where, const char *host, const char *version,
                      rel_manifest *out, act_error *err)
{
    assert(where);
    assert(host);
    assert(version);
    assert(out);
    memset(out, 0, sizeof(*out));
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = read_bounded(version_dirfd, where, &text, &len, err);
    if (r < 0)
        return r;

    /* A manifest is three levels deep; a small depth limit keeps a hostile
     * file from recursing the parser deep. */
    _cleanup_(json_tokener_freep) json_tokener *tok = json_tokener_new_ex(8);
    if (!tok)
        return act_error_set(err, ENOMEM, "out of memory reading manifest %s", where);
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
    _cleanup_(json_object_putp) json_object *root = json_tokener_parse_ex(tok, text, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    if (!root || jerr != json_tokener_success)
        return act_error_set(err, EUCLEAN,
                             "manifest %s is not valid JSON (%s at byte %zu); "
                             "restage the version",
                             where,
                             jerr == json_tokener_continue ? "unexpected end of file"
                                                           : json_tokener_error_desc(jerr),
                             json_tokener_get_parse_end(tok));
    if (json_tokener_get_parse_end(tok) != len)
        return act_error_set(err, EUCLEAN,
                             "manifest %s is not valid JSON (trailing data after "
                             "byte %zu); restage the version",
                             where, json_tokener_get_parse_end(tok));
    if (!json_object_is_type(root, json_type_object))
        return act_error_set(err, EUCLEAN, "manifest %s: the top level must be an object", where);

    _cleanup_(rel_manifest_clear) rel_manifest m = {0};
    json_object *value = NULL;
    uint64_t format = 0;
    r = get_uint64(root, where, "format", "format", &format, err);
    if (r == 0 && format != MANIFEST_FORMAT)
        r = act_error_set(err, EUCLEAN,
                          "manifest %s: field format is %llu, this activator reads format %d",
                          where, (unsigned long long)format, MANIFEST_FORMAT);
    if (r == 0)
        r = get_string(root, where, "host", "host", m.host, sizeof(m.host), err);
    if (r == 0 && strcmp(m.host, host) != 0)
        r = act_error_set(err, EUCLEAN,
                          "manifest %s: field host is \"%s\" but the build is "
                          "staged for host %s",
                          where, m.host, host);
    if (r == 0)
        r = get_string(root, where, "version", "version", m.version, sizeof(m.version), err);
    if (r == 0 && strcmp(m.version, version) != 0)
        r = act_error_set(err, EUCLEAN,
                          "manifest %s: field version is \"%s\" but the build is "
                          "staged as version %s",
                          where, m.version, version);
    if (r == 0)
        r = get_string(root, where, "exec_path", "exec_path", m.exec_path, sizeof(m.exec_path),
                       err);
    if (r == 0 && !rel_build_path_is_valid(m.exec_path))
        r = act_error_set(err, EUCLEAN,
                          "manifest %s: field exec_path is not a valid path inside a build", where);
    if (r == 0)
        r = get_string(root, where, "build_digest", "build_digest", m.build_digest,
                       sizeof(m.build_digest), err);
    if (r == 0 && !rel_digest_is_valid(m.build_digest))
        r = act_error_set(err, EUCLEAN,
                          "manifest %s: field build_digest is not 64 lowercase hex digits", where);
    if (r == 0)
        r = get_uint64(root, where, "staged_at", "staged_at", &m.staged_at, err);
    if (r == 0)
        r = get_field(root, where, "files", "files", json_type_array, &value, err);
    if (r == 0)
        r = parse_files(value, where, &m, err);
    if (r == 0 && !rel_manifest_find(&m, m.exec_path))
        r = act_error_set(err, EUCLEAN,
                          "manifest %s: field exec_path names %s, which is not in files", where,
                          m.exec_path);
    char computed[REL_DIGEST_SIZE];
    if (r == 0 && rel_build_digest(m.files, m.n_files, computed) < 0)
        r = act_error_set(err, EIO, "manifest %s: cannot compute the build digest", where);
    /* The build digest is what a pin names; recomputing it from the file
     * list is what binds a pin to the executable resolve hashes. */
    if (r == 0 && strcmp(computed, m.build_digest) != 0)
        r = act_error_set(err, EUCLEAN,
                          "manifest %s: field build_digest is %s but its files list gives %s; "
                          "the manifest was edited; restage the version",
                          where, m.build_digest, computed);
    if (r < 0)
        return r;
    *out = TAKE_STRUCT(m);
    return 0;
}
