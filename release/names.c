/* The rules for the strings that become paths inside the releases tree. */
#include <assert.h>
#include <errno.h>
#include <string.h>

#include "common/names.h"
#include "release/internal.h"

/* Host and version names are common/names.h names, kept in fields of
 * REL_NAME_SIZE bytes. */
static_assert(REL_NAME_SIZE == ACT_NAME_MAX + 1, "REL_NAME_SIZE does not fit a name");

int rel_version_check(const char *version, act_error *err)
{
    int r = act_name_check("version", version, err);
    if (r < 0)
        return r;
    if (strcmp(version, REL_LIVE_NAME) == 0)
        return act_error_set(err, EINVAL,
                             "version name \"live\" is reserved for the live link; pick another "
                             "version name");
    return 0;
}

int rel_names_check(const char *host, const char *version, act_error *err)
{
    int r = act_name_check("host", host, err);
    if (r < 0)
        return r;
    r = rel_version_check(version, err);
    return r < 0 ? act_error_prefix(err, "host %s", host) : 0;
}

static bool component_char_ok(unsigned char c)
{
    /* Control characters would make paths unprintable in errors and in
     * manifests; '/' separates components and is handled by the caller. */
    return c >= 0x20 && c != 0x7f;
}

bool rel_build_path_is_valid(const char *path)
{
    if (!path || path[0] == '\0' || path[0] == '/')
        return false;
    if (strlen(path) >= REL_PATH_SIZE)
        return false;
    const char *p = path;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (len == 0 || len > 255)
            return false;
        if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
            return false;
        for (size_t i = 0; i < len; i++)
            if (!component_char_ok((unsigned char)p[i]))
                return false;
        if (!slash)
            return true;
        p = slash + 1;
    }
}

int rel_build_path_check(const char *what, const char *path, act_error *err)
{
    assert(what);
    if (rel_build_path_is_valid(path))
        return 0;
    if (!path || path[0] == '\0')
        return act_error_set(err, EINVAL, "%s is empty; give a relative path inside the build",
                             what);
    /* Show at most a bounded, printable part of the bad path. */
    char shown[128];
    size_t o = 0;
    for (const char *p = path; *p && o + 5 < sizeof(shown); p++) {
        unsigned char c = (unsigned char)*p;
        if (component_char_ok(c) && c < 0x80)
            shown[o++] = (char)c;
        else
            shown[o++] = '?';
    }
    shown[o] = '\0';
    return act_error_set(err, EINVAL,
                         "%s \"%s\" is not a path inside the build: it must be relative, shorter "
                         "than %d bytes, with no empty, \".\" or \"..\" component and no control "
                         "characters",
                         what, shown, REL_PATH_SIZE);
}

bool rel_digest_is_valid(const char *digest)
{
    if (!digest)
        return false;
    size_t i = 0;
    for (; digest[i]; i++) {
        char c = digest[i];
        if (i >= REL_DIGEST_SIZE - 1 || !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
    }
    return i == REL_DIGEST_SIZE - 1;
}

bool rel_symlink_target_is_valid(const char *target)
{
    if (!target || target[0] == '\0' || target[0] == '/' || strlen(target) >= REL_PATH_SIZE)
        return false;
    for (const char *p = target; *p; p++)
        if (*p != '/' && !component_char_ok((unsigned char)*p))
            return false;
    return true;
}
