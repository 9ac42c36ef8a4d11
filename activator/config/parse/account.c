#include "activator/config/parse/account.h"

#include <assert.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"

/* 1 with *id set when text is a number, 0 when it is not, -ERANGE when it is
 * a number that is not an id: (uid_t)-1 means "no change" to setresuid, and
 * 65535 is the same for 16-bit ids, so neither is ever a real account. */
static int parse_id(const char *text, uint32_t *id)
{
    size_t len = strlen(text);
    if (len == 0 || strspn(text, "0123456789") != len)
        return 0;
    errno = 0;
    unsigned long long value = strtoull(text, NULL, 10);
    if (errno || value >= UINT32_MAX || value == 65535)
        return -ERANGE;
    *id = (uint32_t)value;
    return 1;
}

int cfg_parse_account_name(const char *what, const char *text, act_error *err)
{
    assert(what && text);
    char shown[ACT_TEXT_SHOW_MAX];
    uint32_t id = 0;
    int numeric = parse_id(text, &id);
    if (numeric < 0)
        return act_error_set(err, ERANGE,
                             "%s id %s is out of range (use 0 to 4294967294, except 65535)", what,
                             act_text_show(text, shown, sizeof(shown)));
    if (numeric)
        return 0;
    size_t len = strlen(text);
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

/* getpwnam(3) and its kin return NULL for both "no such entry" and a failed
 * lookup; these errno values (or none) mean the former. */
static bool lookup_found_nothing(int errnum)
{
    return errnum == 0 || errnum == ENOENT || errnum == ESRCH || errnum == EBADF || errnum == EPERM;
}

static int lookup_failed(const char *key, const char *text, const char *what, int errnum,
                         act_error *err)
{
    char shown[ACT_TEXT_SHOW_MAX];
    act_text_show(text, shown, sizeof(shown));
    if (lookup_found_nothing(errnum))
        return act_error_set(err, ENOENT,
                             "%s=%s: no such %s on this box; create it or change %s=", key, shown,
                             what, key);
    return act_error_set(err, errnum,
                         "%s=%s: cannot look the %s up: %s; check the %s database "
                         "(/etc/nsswitch.conf)",
                         key, shown, what, strerror(errnum), what);
}

/* The syntax check of cfg_parse_account_name, with key= in front. */
static int check_account(const char *key, const char *what, const char *text, uint32_t *id,
                         act_error *err)
{
    int r = cfg_parse_account_name(what, text, err);
    if (r < 0)
        return act_error_prefix(err, "%s", key);
    return parse_id(text, id);
}

int cfg_resolve_user(const char *key, const char *text, uid_t *uid, gid_t *gid, act_error *err)
{
    assert(key && text && uid && gid);
    uint32_t id = 0;
    int numeric = check_account(key, "user", text, &id, err);
    if (numeric < 0)
        return numeric;
    errno = 0;
    struct passwd *entry = numeric ? getpwuid(id) : getpwnam(text);
    if (entry) {
        *uid = entry->pw_uid;
        *gid = entry->pw_gid;
        return 0;
    }
    if (!numeric || !lookup_found_nothing(errno))
        return lookup_failed(key, text, "user", errno, err);
    *uid = id;
    *gid = id;
    return 0;
}

int cfg_resolve_group(const char *key, const char *text, gid_t *gid, act_error *err)
{
    assert(key && text && gid);
    uint32_t id = 0;
    int numeric = check_account(key, "group", text, &id, err);
    if (numeric < 0)
        return numeric;
    if (numeric) {
        *gid = id;
        return 0;
    }
    errno = 0;
    struct group *entry = getgrnam(text);
    if (!entry)
        return lookup_failed(key, text, "group", errno, err);
    *gid = entry->gr_gid;
    return 0;
}
