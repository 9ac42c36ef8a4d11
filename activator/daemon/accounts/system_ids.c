/* The ids the user and group databases know (see accounts/system_ids.h). */
#include "activator/daemon/accounts/system_ids.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/fileio.h"

#define NSSWITCH_DEFAULT "/etc/nsswitch.conf"
#define NSSWITCH_MAX (64 * 1024)

struct ad_system_ids {
    uint32_t *ids; /* sorted: every uid and gid listed */
    size_t n, cap;
    bool whole; /* the lists hold all that a lookup could find */
};

/* The sources that list everything they answer for. */
static bool source_lists_whole(const char *source, size_t len)
{
    static const char *const whole[] = {"files", "extrausers", "systemd"};
    for (size_t i = 0; i < sizeof(whole) / sizeof(whole[0]); i++)
        if (strlen(whole[i]) == len && strncmp(source, whole[i], len) == 0)
            return true;
    return false;
}

/* The sources of one line after "database:": names, and [STATUS=action]
 * items between them, which are skipped. */
static bool line_lists_whole(const char *p, const char *end)
{
    while (p < end) {
        p += strspn(p, " \t");
        if (p >= end || *p == '#')
            break;
        if (*p == '[') {
            const char *close = memchr(p, ']', (size_t)(end - p));
            if (!close)
                return false;
            p = close + 1;
            continue;
        }
        size_t len = strcspn(p, " \t[#\n");
        if (len > (size_t)(end - p))
            len = (size_t)(end - p);
        if (!source_lists_whole(p, len))
            return false;
        p += len;
    }
    return true;
}

/* The line of database in text, as [*start, *end), or false without one. */
static bool find_line(const char *text, const char *database, const char **start, const char **end)
{
    size_t len = strlen(database);
    for (const char *line = text; line && *line;) {
        const char *next = strchr(line, '\n');
        const char *stop = next ? next : line + strlen(line);
        const char *p = line + strspn(line, " \t");
        if (strncmp(p, database, len) == 0) {
            const char *colon = p + len + strspn(p + len, " \t");
            if (*colon == ':' && colon < stop) {
                *start = colon + 1;
                *end = stop;
                return true;
            }
        }
        line = next ? next + 1 : NULL;
    }
    return false;
}

bool ad_nsswitch_lists_whole(const char *text)
{
    static const char *const databases[] = {"passwd", "group"};
    for (size_t i = 0; i < 2; i++) {
        const char *start, *end;
        if (find_line(text, databases[i], &start, &end) && !line_lists_whole(start, end))
            return false;
    }
    return true;
}

static int add(ad_system_ids *ids, uint32_t id)
{
    if (ids->n == ids->cap) {
        size_t cap = ids->cap ? 2 * ids->cap : 128;
        uint32_t *grown = realloc(ids->ids, cap * sizeof(*grown));
        if (!grown)
            return -ENOMEM;
        ids->ids = grown;
        ids->cap = cap;
    }
    ids->ids[ids->n++] = id;
    return 0;
}

static int compare_ids(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

int ad_system_ids_read(const char *nsswitch, ad_system_ids **out, act_error *err)
{
    *out = NULL;
    ad_system_ids *ids = calloc(1, sizeof(*ids));
    if (!ids)
        return act_error_set(err, ENOMEM, "out of memory");
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    act_error why = {0};
    int r = act_read_file(AT_FDCWD, nsswitch ? nsswitch : NSSWITCH_DEFAULT, NSSWITCH_MAX, &text,
                          &len, &why);
    /* Without the file glibc looks in files alone; a file that cannot be
     * read may name anything. */
    ids->whole = r == -ENOENT || (r == 0 && ad_nsswitch_lists_whole(text));
    r = 0;
    setpwent();
    for (struct passwd *pw; r == 0 && (pw = getpwent());)
        if ((r = add(ids, (uint32_t)pw->pw_uid)) == 0)
            r = add(ids, (uint32_t)pw->pw_gid);
    endpwent();
    setgrent();
    for (struct group *gr; r == 0 && (gr = getgrent());)
        r = add(ids, (uint32_t)gr->gr_gid);
    endgrent();
    if (r < 0) {
        ad_system_ids_free(ids);
        return act_error_set(err, ENOMEM, "out of memory");
    }
    qsort(ids->ids, ids->n, sizeof(*ids->ids), compare_ids);
    *out = ids;
    return 0;
}

void ad_system_ids_free(ad_system_ids *ids)
{
    if (!ids)
        return;
    free(ids->ids);
    free(ids);
}

static bool looked_up(uint32_t id)
{
    struct passwd pw, *found_pw = NULL;
    struct group gr, *found_gr = NULL;
    char buf[16384];
    int r = getpwuid_r(id, &pw, buf, sizeof(buf), &found_pw);
    if (r != 0 || found_pw)
        return true;
    r = getgrgid_r(id, &gr, buf, sizeof(buf), &found_gr);
    return r != 0 || found_gr;
}

bool ad_system_ids_known(const ad_system_ids *ids, uint32_t id)
{
    if (!ids)
        return looked_up(id);
    if (ids->n && bsearch(&id, ids->ids, ids->n, sizeof(id), compare_ids))
        return true;
    return !ids->whole && looked_up(id);
}
