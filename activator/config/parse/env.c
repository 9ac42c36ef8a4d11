#include "activator/config/parse/env.h"

#include <errno.h>
#include <string.h>

#include "common/text.h"

static bool reserved_key(const char *key, size_t len)
{
    static const char *const exact[] = {"LISTEN_FDS",    "LISTEN_PID",    "LISTEN_FDNAMES",
                                        "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"};
    for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++)
        if (strlen(exact[i]) == len && strncmp(key, exact[i], len) == 0)
            return true;
    return len >= 10 && strncmp(key, "ACTIVATOR_", 10) == 0;
}

int cfg_parse_env_assignment(const char *word, act_error *err)
{
    char shown[ACT_TEXT_SHOW_MAX];
    const char *eq = strchr(word, '=');
    size_t key_len = eq ? (size_t)(eq - word) : strlen(word);
    bool key_ok =
        key_len > 0 && !(word[0] >= '0' && word[0] <= '9') &&
        strspn(word, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == key_len;
    if (!eq)
        return act_error_set(err, EINVAL,
                             "\"%s\" is not an assignment (write KEY=VALUE; quote it as "
                             "\"KEY=VALUE WITH SPACES\" when the value has blanks)",
                             act_text_show(word, shown, sizeof(shown)));
    if (!key_ok)
        return act_error_set(err, EINVAL,
                             "\"%s\" has a bad variable name (names are letters, digits and _, "
                             "not starting with a digit)",
                             act_text_show(word, shown, sizeof(shown)));
    if (reserved_key(word, key_len))
        return act_error_set(err, EINVAL,
                             "%.*s is set by activatord for each generation (choose another "
                             "variable name)",
                             (int)key_len, word);
    return 0;
}

bool cfg_env_same_key(const char *a, const char *b)
{
    size_t len = strcspn(a, "=");
    return strncmp(a, b, len) == 0 && b[len] == '=';
}
