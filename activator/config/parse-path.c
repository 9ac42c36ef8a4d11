#include "activator/config/parse-path.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>

#include "common/text.h"

/* True when some "/"-separated component of path is "." or "..". */
static bool has_dot_component(const char *path)
{
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

/* What every path must pass, whatever it is relative to. */
static int check_characters_and_length(const char *text, const char *shown, act_error *err)
{
    if (has_control_char(text))
        return act_error_set(err, EINVAL,
                             "\"%s\" has a control character (remove it from the path)", shown);
    if (strlen(text) >= PATH_MAX)
        return act_error_set(err, ENAMETOOLONG, "the path is longer than %d bytes (shorten it)",
                             PATH_MAX - 1);
    return 0;
}

int act_parse_absolute_path(const char *text, act_error *err)
{
    char shown[ACT_TEXT_SHOW_MAX];
    act_text_show(text, shown, sizeof(shown));
    if (text[0] != '/')
        return act_error_set(err, EINVAL, "\"%s\" is not an absolute path (start it with /)",
                             shown);
    if (has_dot_component(text))
        return act_error_set(err, EINVAL,
                             "\"%s\" has a . or .. component (write the path without them)", shown);
    return check_characters_and_length(text, shown, err);
}

int act_parse_build_path(const char *text, act_error *err)
{
    char shown[ACT_TEXT_SHOW_MAX];
    act_text_show(text, shown, sizeof(shown));
    if (text[0] == '\0')
        return act_error_set(err, EINVAL,
                             "the program path is empty (name a file inside the staged build, "
                             "like bin/server)");
    if (text[0] == '/')
        return act_error_set(err, EINVAL,
                             "\"%s\" is absolute, but the program must come from the verified "
                             "staged build (write its path inside the build, like bin/server)",
                             shown);
    if (has_dot_component(text))
        return act_error_set(err, EINVAL,
                             "\"%s\" has a . or .. component and could leave the build (write "
                             "the plain path inside the build)",
                             shown);
    return check_characters_and_length(text, shown, err);
}
