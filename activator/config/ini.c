/* The inih glue: a reader that counts lines (inih's handler gets no line
 * number in Debian's build), normalises each line and reports what inih would
 * only flag by the first line number, and a handler that dispatches keys. */
#include <errno.h>
#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "activator/config/config-internal.h"
#include "common/cleanup.h"
#include "common/fileio.h"

/* A configuration file is a few dozen lines; anything larger is a mistake
 * (a binary, a log) and is refused before it is parsed. */
#define INI_FILE_MAX (256 * 1024)

typedef struct ini_state {
    char *text; /* the whole file, NUL-terminated; its lines are cut in place */
    size_t text_len, next;
    const char *path;
    const cfg_ini_key *keys;
    size_t n_keys;
    void *target;
    unsigned *key_lines;
    cfg_errors *errors;
    unsigned line;
    bool section_known; /* keys of an unknown section were already reported */
    int problems;
} ini_state;

static void problem(ini_state *st, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void problem(ini_state *st, const char *key, const char *fmt, ...)
{
    char what[1280];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    cfg_errors_add(st->errors, st->path, st->line, key, "%s", what);
    st->problems++;
}

static bool section_exists(const ini_state *st, const char *section)
{
    for (size_t i = 0; i < st->n_keys; i++)
        if (strcmp(st->keys[i].section, section) == 0)
            return true;
    return false;
}

/* "[Host], [Listen] or [Limits]" from the key table, in table order. */
static void list_sections(const ini_state *st, char *out, size_t out_size)
{
    const char *seen[16];
    size_t n_seen = 0;
    for (size_t i = 0; i < st->n_keys && n_seen < 16; i++) {
        bool dup = false;
        for (size_t j = 0; j < n_seen; j++)
            dup |= strcmp(seen[j], st->keys[i].section) == 0;
        if (!dup)
            seen[n_seen++] = st->keys[i].section;
    }
    size_t used = 0;
    out[0] = '\0';
    for (size_t j = 0; j < n_seen && used < out_size; j++)
        used += (size_t)snprintf(out + used, out_size - used, "%s[%s]",
                                 j == 0 ? "" : (j + 1 == n_seen ? " or " : ", "), seen[j]);
}

/* Cuts a '#' or ';' that follows a blank: an inline comment, as in
 * "IdleTimeoutSec=300   # 0: never park". */
static void strip_inline_comment(char *line)
{
    for (char *p = line + 1; *p; p++) {
        if ((*p == '#' || *p == ';') && (p[-1] == ' ' || p[-1] == '\t')) {
            *p = '\0';
            return;
        }
    }
}

static void rstrip(char *line)
{
    size_t len = strlen(line);
    while (len && (line[len - 1] == ' ' || line[len - 1] == '\t' || line[len - 1] == '\r' ||
                   line[len - 1] == '\n'))
        line[--len] = '\0';
}

/* Checks a "[Section]" line; returns false when inih should not see it. */
static bool check_section_line(ini_state *st, char *line)
{
    size_t len = strlen(line);
    if (len < 3 || line[len - 1] != ']') {
        /* Keys below a broken header belong to no known section; reporting
         * each of them as unknown would bury the one real mistake. */
        st->section_known = false;
        problem(st, NULL, "a section header must be one [Name] on its own line (fix the line)");
        return false;
    }
    char name[128];
    snprintf(name, sizeof(name), "%.*s", (int)(len - 2), line + 1);
    st->section_known = section_exists(st, name);
    if (!st->section_known) {
        char known[128], shown[160];
        list_sections(st, known, sizeof(known));
        snprintf(shown, sizeof(shown), "[%.120s]", name);
        problem(st, shown, "unknown section (use %s)", known);
    }
    return true;
}

static char *read_line(char *str, int num, void *stream)
{
    ini_state *st = stream;
    if (st->next >= st->text_len)
        return NULL;
    char *line = st->text + st->next;
    char *end = memchr(line, '\n', st->text_len - st->next);
    size_t len = end ? (size_t)(end - line) : st->text_len - st->next;
    st->next += len + 1;
    if (end)
        *end = '\0';
    st->line++;
    if (len != strlen(line)) {
        problem(st, NULL, "the line holds a NUL byte (this is not a text file; fix or remove it)");
        line[0] = '\0';
    }
    if (st->line == 1 && strncmp(line, "\xEF\xBB\xBF", 3) == 0)
        line += 3;
    line += strspn(line, " \t");
    rstrip(line);
    if (line[0] == '#' || line[0] == ';' || line[0] == '\0') {
        str[0] = '\0';
        return str;
    }
    strip_inline_comment(line);
    rstrip(line);

    bool pass = true;
    if ((int)strlen(line) >= num) {
        problem(st, NULL,
                "the line is longer than %d characters (shorten it; repeatable keys "
                "such as Environment= can be split over several lines)",
                num - 1);
        pass = false;
    } else if (line[0] == '[') {
        pass = check_section_line(st, line);
    } else {
        /* inih also splits at ':', so "Ready:notify" would quietly mean
         * Ready=notify; this format, like systemd's, takes only '='. */
        size_t key_len = strcspn(line, "=:");
        if (line[key_len] != '=') {
            problem(st, NULL, "expected KEY=VALUE, a [Section] or a comment (fix the line)");
            pass = false;
        } else if (key_len == 0) {
            problem(st, NULL, "the line has no key before '=' (write KEY=VALUE)");
            pass = false;
        }
    }
    if (!pass) {
        str[0] = '\0';
        return str;
    }
    memcpy(str, line, strlen(line) + 1);
    return str;
}

static int handle_key(void *user, const char *section, const char *name, const char *value)
{
    ini_state *st = user;
    if (section[0] == '\0') {
        char known[128];
        list_sections(st, known, sizeof(known));
        problem(st, name, "the key comes before any section (put it under %s)", known);
        return 1;
    }
    if (!st->section_known)
        return 1; /* the section header was reported once */
    const cfg_ini_key *key = NULL;
    size_t index = 0;
    for (size_t i = 0; i < st->n_keys && !key; i++) {
        if (strcmp(st->keys[i].name, name) == 0 && strcmp(st->keys[i].section, section) == 0) {
            key = &st->keys[i];
            index = i;
        }
    }
    if (!key) {
        const char *hint = NULL, *home = NULL;
        for (size_t i = 0; i < st->n_keys; i++) {
            if (strcmp(st->keys[i].name, name) == 0)
                home = st->keys[i].section;
            else if (!hint && strcmp(st->keys[i].section, section) == 0 &&
                     strcasecmp(st->keys[i].name, name) == 0)
                hint = st->keys[i].name;
        }
        if (home) {
            problem(st, name, "belongs in [%s], not in [%s] (move the line)", home, section);
        } else if (hint) {
            problem(st, name, "unknown key in [%s] (keys are case-sensitive: did you mean %s?)",
                    section, hint);
        } else {
            char known[768];
            size_t used = 0;
            known[0] = '\0';
            for (size_t i = 0; i < st->n_keys && used < sizeof(known); i++)
                if (strcmp(st->keys[i].section, section) == 0)
                    used += (size_t)snprintf(known + used, sizeof(known) - used, "%s%s",
                                             used ? ", " : "", st->keys[i].name);
            problem(st, name, "unknown key in [%s] (it takes %s)", section, known);
        }
        return 1;
    }
    if (!key->repeatable) {
        if (st->key_lines[index]) {
            problem(st, name, "set twice, first on line %u (keep one of them)",
                    st->key_lines[index]);
            return 1;
        }
        if (value[0] == '\0') {
            st->key_lines[index] = st->line;
            problem(st, name,
                    "the value is empty (give a value, or remove the line to keep the "
                    "default)");
            return 1;
        }
    }
    st->key_lines[index] = st->line;
    act_error err = {0};
    if (key->apply(st->target, value, &err) < 0)
        problem(st, name, "%s", err.message);
    return 1;
}

static int cannot_read(cfg_errors *errors, const char *path, int error)
{
    cfg_errors_add(errors, path, 0, NULL, "cannot read: %s (check the file)", strerror(error));
    return -error;
}

int cfg_ini_parse_fd(int fd, const char *path, const cfg_ini_key *keys, size_t n_keys, void *target,
                     unsigned *key_lines, cfg_errors *errors)
{
    struct stat stat_buf;
    if (fstat(fd, &stat_buf) < 0)
        return cannot_read(errors, path, errno);
    if (!S_ISREG(stat_buf.st_mode)) {
        cfg_errors_add(errors, path, 0, NULL, "not a regular file (replace it with a text file)");
        return -EISDIR;
    }
    if (stat_buf.st_size > INI_FILE_MAX) {
        cfg_errors_add(errors, path, 0, NULL,
                       "the file is larger than %d KiB (is it the right file?)",
                       INI_FILE_MAX / 1024);
        return -EFBIG;
    }
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    /* Whole, at once, rather than through stdio (a start reads 10,000 of
     * them): st_size is what one read takes unless the file grew since. */
    int r = act_read_fd(fd, (size_t)stat_buf.st_size, INI_FILE_MAX, &text, &len);
    if (r == -EFBIG) {
        cfg_errors_add(errors, path, 0, NULL,
                       "the file is larger than %d KiB (is it the right file?)",
                       INI_FILE_MAX / 1024);
        return r;
    }
    if (r < 0)
        return cannot_read(errors, path, -r);
    ini_state st = {
        .text = text,
        .text_len = len,
        .path = path,
        .keys = keys,
        .n_keys = n_keys,
        .target = target,
        .key_lines = key_lines,
        .errors = errors,
    };
    r = ini_parse_stream(read_line, &st, handle_key, &st);
    if (r < 0) {
        cfg_errors_add(errors, path, 0, NULL, "cannot read the file (check that it is readable)");
        return -EIO;
    }
    if (r > 0 && st.problems == 0) {
        /* The reader passes only lines inih accepts; a line number from inih
         * means a rule this glue does not know yet, so report it rather than
         * lose it. */
        cfg_errors_add(errors, path, (unsigned)r, NULL, "inih cannot parse this line");
        return 1;
    }
    return st.problems;
}
