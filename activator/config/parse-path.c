#include "activator/config/parse-path.h"

#include <errno.h>

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
