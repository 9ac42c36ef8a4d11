#include "activator/config/parse-account.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"

int act_parse_account_name(const char *what, const char *text, act_error *err)
{
    char shown[ACT_TEXT_SHOW_MAX];
    size_t len = strlen(text);
    if (len > 0 && strspn(text, "0123456789") == len) {
        errno = 0;
        unsigned long long id = strtoull(text, NULL, 10);
        /* (uid_t)-1 means "no change" to setresuid and is never a real id. */
        if (errno || id >= 4294967295ULL)
            return act_error_set(err, ERANGE, "%s id %s is out of range (use 0 to 4294967294)",
                                 what, act_text_show(text, shown, sizeof(shown)));
        return 0;
    }
    size_t body = len && text[len - 1] == '$' ? len - 1 : len;
    bool ok =
        body > 0 && len <= 32 &&
        ((text[0] >= 'a' && text[0] <= 'z') || (text[0] >= 'A' && text[0] <= 'Z') ||
         text[0] == '_') &&
        strspn(text, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == body;
    if (!ok)
        return act_error_set(err, EINVAL,
                             "\"%s\" is not a valid %s name (use a name of letters, digits, _ . "
                             "- of at most 32 characters starting with a letter or _, or a "
                             "numeric id)",
                             act_text_show(text, shown, sizeof(shown)), what);
    return 0;
}
