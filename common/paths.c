#include "common/paths.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "common/text.h"

bool act_path_has_dot_component(const char *path)
{
    assert(path);
    for (const char *p = path; *p;) {
        size_t len = strcspn(p, "/");
        if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
            return true;
        p += len;
        p += strspn(p, "/");
    }
    return false;
}

static bool has_control_char(const char *text)
{
    for (const unsigned char *p = (const unsigned char *)text; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return true;
    return false;
}

int act_path_check_characters(const char *path, act_error *err)
{
    assert(path);
    char shown[ACT_TEXT_SHOW_MAX];
    if (has_control_char(path))
        return act_error_set(err, EINVAL,
                             "\"%s\" has a control character (remove it from the path)",
                             act_text_show(path, shown, sizeof(shown)));
    if (strlen(path) >= PATH_MAX)
        return act_error_set(err, ENAMETOOLONG, "the path is longer than %d bytes (shorten it)",
                             PATH_MAX - 1);
    return 0;
}

int act_path_check_absolute(const char *path, act_error *err)
{
    assert(path);
    char shown[ACT_TEXT_SHOW_MAX];
    act_text_show(path, shown, sizeof(shown));
    if (path[0] != '/')
        return act_error_set(err, EINVAL, "\"%s\" is not an absolute path (start it with /)",
                             shown);
    if (act_path_has_dot_component(path))
        return act_error_set(err, EINVAL,
                             "\"%s\" has a . or .. component (write the path without them)", shown);
    return act_path_check_characters(path, err);
}

size_t act_image_layout_path_len(const char *rest)
{
    const char *colon = strrchr(rest, ':');
    return colon && !strchr(colon, '/') ? (size_t)(colon - rest) : strlen(rest);
}
