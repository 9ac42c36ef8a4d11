#include "activator/config/parse/path.h"

#include <errno.h>
#include <string.h>

#include "common/paths.h"
#include "common/text.h"

int cfg_parse_build_path(const char *text, act_error *err)
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
    if (act_path_has_dot_component(text))
        return act_error_set(err, EINVAL,
                             "\"%s\" has a . or .. component and could leave the build (write "
                             "the plain path inside the build)",
                             shown);
    return act_path_check_characters(text, err);
}

int cfg_parse_read_write_path(const char *word, act_error *err)
{
    char shown[ACT_TEXT_SHOW_MAX];
    act_text_show(word, shown, sizeof(shown));
    if (word[0] == '+')
        return act_error_set(err, EINVAL,
                             "\"%s\": \"+\" means a path inside RootDirectory=, which hosts "
                             "do not have (write the absolute path without \"+\")",
                             shown);
    const char *path = word[0] == '-' ? word + 1 : word;
    act_error path_err = {0};
    if (act_path_check_absolute(path, &path_err) < 0)
        return act_error_set(err, EINVAL, "%s (ReadWritePaths= takes absolute paths)",
                             path_err.message);
    if (path[strspn(path, "/")] == '\0')
        return act_error_set(err, EINVAL,
                             "\"%s\" is the whole box; name the directories the host writes "
                             "to",
                             shown);
    if (strcmp(path, "/proc") == 0 || strncmp(path, "/proc/", 6) == 0)
        return act_error_set(err, EINVAL,
                             "\"%s\" is beneath /proc, which each generation gets fresh "
                             "(remove it)",
                             shown);
    return 0;
}
