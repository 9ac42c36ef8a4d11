#include "common/names.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/text.h"

static bool name_char_ok(unsigned char c)
{
    return isascii(c) && (isalnum(c) || c == '.' || c == '_' || c == '-');
}

bool act_name_is_valid(const char *name)
{
    if (!name || name[0] == '\0' || name[0] == '.')
        return false;
    size_t len = 0;
    for (const char *p = name; *p; p++, len++) {
        if (len >= ACT_NAME_MAX || !name_char_ok((unsigned char)*p))
            return false;
    }
    return true;
}

int act_name_check(const char *what, const char *name, act_error *err)
{
    assert(what);
    if (act_name_is_valid(name))
        return 0;
    if (!name || name[0] == '\0')
        return act_error_set(err, EINVAL, "%s name is empty; use 1 to %d characters of A-Z a-z 0-9 . _ -",
                             what, ACT_NAME_MAX);
    char shown[ACT_TEXT_SHOW_MAX];
    act_text_show(name, shown, sizeof(shown));
    if (strlen(name) > ACT_NAME_MAX)
        return act_error_set(err, EINVAL, "%s name \"%s\" is longer than %d characters; use a shorter name",
                             what, shown, ACT_NAME_MAX);
    if (name[0] == '.')
        return act_error_set(err, EINVAL,
                             "%s name \"%s\" starts with '.'; names may not start with a dot", what,
                             shown);
    return act_error_set(err, EINVAL,
                         "%s name \"%s\" has a character outside A-Z a-z 0-9 . _ -; rename it", what,
                         shown);
}

bool act_cn_is_valid(const char *cn, size_t len)
{
    if (!cn || len == 0 || len > ACT_CN_MAX)
        return false;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)cn[i] < 0x20 || (unsigned char)cn[i] > 0x7e)
            return false;
    return true;
}
