/* manifest.json: what a staged build is. It is read from disk on every
 * resolve, so it is treated as outside input: bounded in size, parsed
 * strictly, and every field checked before anything uses it. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/cleanup_json.h"
#include "common/fileio.h"
#include "common/json_fields.h"
#include "release/internal.h"

static const char *const entry_type_names[] = {
    [REL_ENTRY_FILE] = "file",
    [REL_ENTRY_DIR] = "dir",
    [REL_ENTRY_SYMLINK] = "symlink",
};

const char *rel_entry_type_name(rel_entry_type type)
{
    return entry_type_names[type];
}

void rel_file_clear(rel_file *file)
{
    free(file->path);
    free(file->target);
    file->path = file->target = NULL;
}

void rel_manifest_clear(rel_manifest *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_files; i++)
        rel_file_clear(&m->files[i]);
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
    snprintf(id->source, sizeof(id->source), "%s", m->source);
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
    json_object_object_add(root, "format", json_object_new_int(REL_MANIFEST_FORMAT_ENTRIES));
    json_object_object_add(root, "host", json_object_new_string(m->host));
    json_object_object_add(root, "version", json_object_new_string(m->version));
    json_object_object_add(root, "exec_path", json_object_new_string(m->exec_path));
    json_object_object_add(root, "build_digest", json_object_new_string(m->build_digest));
    json_object_object_add(root, "staged_at", json_object_new_uint64(m->staged_at));
    json_object_object_add(root, "source", json_object_new_string(m->source));
    for (size_t i = 0; i < m->n_files; i++) {
        const rel_file *file = &m->files[i];
        json_object *f = json_object_new_object();
        if (!f)
            return act_error_set(err, ENOMEM, "out of memory writing the manifest");
        json_object_object_add(f, "path", json_object_new_string(file->path));
        json_object_object_add(f, "type", json_object_new_string(rel_entry_type_name(file->type)));
        json_object_object_add(f, "mode", json_object_new_int((int)file->mode));
        if (file->type == REL_ENTRY_FILE) {
            json_object_object_add(f, "size", json_object_new_uint64(file->size));
            json_object_object_add(f, "sha256", json_object_new_string(file->digest));
        } else if (file->type == REL_ENTRY_SYMLINK) {
            json_object_object_add(f, "target", json_object_new_string(file->target));
        }
        json_object_array_add(files, f);
    }
    json_object_object_add(root, "entries", TAKE_PTR(files));

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

/* The reader of a manifest's fields: errors name the file and the field. */
static act_json_reader manifest_reader(const char *prefix, act_error *err)
{
    return (act_json_reader){
        .prefix = prefix, .advice = "restage the version", .errnum = EUCLEAN, .err = err};
}

/* The size and digest of a file entry (every entry of a format 1
 * manifest is one). */
static int parse_file_content(const act_json_reader *in, json_object *f, rel_file *file)
{
    file->type = REL_ENTRY_FILE;
    int r = act_json_get_u64(in, f, "size", ACT_JSON_REQUIRED, &file->size);
    if (r < 0)
        return r;
    r = act_json_get_string(in, f, "sha256", ACT_JSON_REQUIRED, file->digest, sizeof(file->digest));
    if (r < 0)
        return r;
    if (!rel_digest_is_valid(file->digest))
        return act_json_field_error(in, "sha256", "is not 64 lowercase hex digits");
    return 0;
}

/* The type, mode and content of entry in (a format 2 manifest): a file's
 * size and digest, a symlink's target. The modes are the ones a stage
 * gives. */
static int parse_entry_kind(const act_json_reader *in, json_object *f, rel_file *file)
{
    char type[16];
    int r = act_json_get_string(in, f, "type", ACT_JSON_REQUIRED, type, sizeof(type));
    if (r < 0)
        return r;
    if (strcmp(type, "file") == 0)
        file->type = REL_ENTRY_FILE;
    else if (strcmp(type, "dir") == 0)
        file->type = REL_ENTRY_DIR;
    else if (strcmp(type, "symlink") == 0)
        file->type = REL_ENTRY_SYMLINK;
    else
        return act_json_field_error(in, "type", "must be \"file\", \"dir\" or \"symlink\"");
    uint64_t mode = 0;
    r = act_json_get_u64(in, f, "mode", ACT_JSON_REQUIRED, &mode);
    if (r < 0)
        return r;
    bool mode_ok = file->type == REL_ENTRY_FILE
                       ? mode == REL_MODE_FILE || mode == REL_MODE_EXECUTABLE
                   : file->type == REL_ENTRY_DIR ? mode == REL_MODE_DIR
                                                 : mode == REL_MODE_SYMLINK;
    if (!mode_ok)
        return act_json_field_error(in, "mode",
                                    "is not a mode a stage gives (files 0444 or 0555, "
                                    "directories 0755, symlinks 0777)");
    file->mode = (unsigned)mode;
    if (file->type == REL_ENTRY_SYMLINK) {
        char target[REL_PATH_SIZE];
        r = act_json_get_string(in, f, "target", ACT_JSON_REQUIRED, target, sizeof(target));
        if (r < 0)
            return r;
        if (!rel_symlink_target_is_valid(target))
            return act_json_field_error(in, "target",
                                        "is not a relative path without control characters");
        file->target = strdup(target);
        return file->target ? 0 : act_error_set(in->err, ENOMEM, "out of memory");
    }
    if (file->type != REL_ENTRY_FILE)
        return 0;
    return parse_file_content(in, f, file);
}

static int parse_files(const act_json_reader *rd, json_object *array, const char *where,
                       const char *field, rel_manifest *m)
{
    act_error *err = rd->err;
    size_t n = json_object_array_length(array);
    if (n == 0)
        return act_error_set(err, EUCLEAN,
                             "manifest %s: field %s is empty; a build has at "
                             "least its executable",
                             where, field);
    m->files = calloc(n, sizeof(rel_file));
    if (!m->files)
        return act_error_set(err, ENOMEM, "out of memory reading manifest %s", where);
    for (size_t i = 0; i < n; i++) {
        json_object *f = json_object_array_get_idx(array, i);
        char entry[32];
        snprintf(entry, sizeof(entry), "%s[%zu]", field, i);
        if (!json_object_is_type(f, json_type_object))
            return act_json_field_error(rd, entry, "must be an object");
        act_json_reader in = *rd;
        in.parent = entry;
        rel_file *file = &m->files[i];
        char path[REL_PATH_SIZE];
        int r = act_json_get_string(&in, f, "path", ACT_JSON_REQUIRED, path, sizeof(path));
        if (r < 0)
            return r;
        if (!rel_build_path_is_valid(path) || strcmp(path, REL_MANIFEST_NAME) == 0)
            return act_json_field_error(&in, "path", "is not a valid path inside a build");
        file->path = strdup(path);
        if (!file->path)
            return act_error_set(err, ENOMEM, "out of memory reading manifest %s", where);
        m->n_files = i + 1;
        if (i > 0 && strcmp(m->files[i - 1].path, path) >= 0)
            return act_error_set(err, EUCLEAN,
                                 "manifest %s: field %s.path is out of order or repeated; entries "
                                 "must be sorted by path without duplicates",
                                 where, entry);
        r = m->format == REL_MANIFEST_FORMAT_FILES ? parse_file_content(&in, f, file)
                                                   : parse_entry_kind(&in, f, file);
        if (r < 0)
            return r;
    }
    return 0;
}

/* Parses text as one JSON object, strictly, into *out. */
static int parse_object(const char *text, size_t len, const char *where, json_object **out,
                        act_error *err)
{
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
    *out = TAKE_PTR(root);
    return 0;
}

/* The fields about the build as a whole, which must name this host and
 * version. */
static int parse_build_fields(const act_json_reader *rd, json_object *root, const char *where,
                              const char *host, const char *version, rel_manifest *m)
{
    act_error *err = rd->err;
    uint64_t format = 0;
    int r = act_json_get_u64(rd, root, "format", ACT_JSON_REQUIRED, &format);
    if (r == 0 && format != REL_MANIFEST_FORMAT_FILES && format != REL_MANIFEST_FORMAT_ENTRIES)
        r = act_error_set(err, EUCLEAN,
                          "manifest %s: field format is %llu, this activator reads formats %d "
                          "and %d; stage the build again with this activator",
                          where, (unsigned long long)format, REL_MANIFEST_FORMAT_FILES,
                          REL_MANIFEST_FORMAT_ENTRIES);
    m->format = (unsigned)format;
    if (r == 0)
        r = act_json_get_string(rd, root, "host", ACT_JSON_REQUIRED, m->host, sizeof(m->host));
    if (r == 0 && strcmp(m->host, host) != 0)
        r = act_error_set(err, EUCLEAN,
                          "manifest %s: field host is \"%s\" but the build is "
                          "staged for host %s",
                          where, m->host, host);
    if (r == 0)
        r = act_json_get_string(rd, root, "version", ACT_JSON_REQUIRED, m->version,
                                sizeof(m->version));
    if (r == 0 && strcmp(m->version, version) != 0)
        r = act_error_set(err, EUCLEAN,
                          "manifest %s: field version is \"%s\" but the build is "
                          "staged as version %s",
                          where, m->version, version);
    if (r == 0)
        r = act_json_get_string(rd, root, "exec_path", ACT_JSON_REQUIRED, m->exec_path,
                                sizeof(m->exec_path));
    if (r == 0 && !rel_build_path_is_valid(m->exec_path))
        r = act_json_field_error(rd, "exec_path", "is not a valid path inside a build");
    if (r == 0)
        r = act_json_get_string(rd, root, "build_digest", ACT_JSON_REQUIRED, m->build_digest,
                                sizeof(m->build_digest));
    if (r == 0 && !rel_digest_is_valid(m->build_digest))
        r = act_json_field_error(rd, "build_digest", "is not 64 lowercase hex digits");
    if (r == 0)
        r = act_json_get_u64(rd, root, "staged_at", ACT_JSON_REQUIRED, &m->staged_at);
    if (r == 0 && m->format == REL_MANIFEST_FORMAT_ENTRIES)
        r = act_json_get_string(rd, root, "source", ACT_JSON_REQUIRED, m->source,
                                sizeof(m->source));
    return r;
}

/* The executable is among the files, and the files give the build digest
 * the manifest names. */
static int check_build_digest(const rel_manifest *m, const char *where, act_error *err)
{
    const rel_file *exec = rel_manifest_find(m, m->exec_path);
    if (!exec || exec->type != REL_ENTRY_FILE)
        return act_error_set(err, EUCLEAN,
                             "manifest %s: field exec_path names %s, which is not a file of the "
                             "build",
                             where, m->exec_path);
    char computed[REL_DIGEST_SIZE];
    if (rel_build_digest(m->format, m->files, m->n_files, computed) < 0)
        return act_error_set(err, EIO, "manifest %s: cannot compute the build digest", where);
    /* The build digest is what a pin names; recomputing it from the file
     * list is what binds a pin to the executable resolve hashes. */
    if (strcmp(computed, m->build_digest) != 0)
        return act_error_set(err, EUCLEAN,
                             "manifest %s: field build_digest is %s but its files list gives %s; "
                             "the manifest was edited; restage the version",
                             where, m->build_digest, computed);
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
    _cleanup_(json_object_putp) json_object *root = NULL;
    r = parse_object(text, len, where, &root, err);
    if (r < 0)
        return r;

    _cleanup_(rel_manifest_clear) rel_manifest m = {0};
    char prefix[PATH_MAX + 16];
    snprintf(prefix, sizeof(prefix), "manifest %s: ", where);
    char label[PATH_MAX + 16];
    snprintf(label, sizeof(label), "manifest %s", where);
    act_json_reader rd = manifest_reader(prefix, err);
    json_object *files = NULL;
    r = parse_build_fields(&rd, root, where, host, version, &m);
    const char *field = m.format == REL_MANIFEST_FORMAT_FILES ? "files" : "entries";
    if (r == 0)
        r = act_json_get_member(&rd, root, field, json_type_array, ACT_JSON_REQUIRED, &files);
    if (r == 0)
        r = parse_files(&rd, files, where, field, &m);
    if (r == 0)
        r = check_build_digest(&m, where, err);
    if (r == 0)
        r = rel_symlinks_stay_inside(&m, label, err);
    if (r < 0)
        return r;
    *out = TAKE_STRUCT(m);
    return 0;
}
