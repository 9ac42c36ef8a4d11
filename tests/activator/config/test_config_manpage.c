/* activatord.conf(5) and the parsers cannot drift apart: the test reads the
 * man page's source (argv[1], man/activatord.conf.5.scd) and checks that
 * the keys documented under each "# [Section] SECTION OPTIONS" heading are
 * exactly those the parser of that section accepts (cfg_daemon_key_at,
 * cfg_host_key_at), each once, each with a "Default:" and an "Example:"
 * that sets it. It also loads the example files installed beside the man
 * page (argv[2], contrib/activatord.conf, and argv[3], contrib/web1.conf):
 * what an operator copies must be accepted as it is. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "activator/config/config.h"
#include "common/cleanup.h"

#define DOCUMENTED_MAX 256

typedef struct documented {
    char section[32];
    char key[64];
    unsigned line;
    bool has_default;
    bool has_example; /* an "Example:" paragraph that sets this key */
} documented;

static const char *manpage_path, *daemon_example_path, *host_example_path;
static documented entries[DOCUMENTED_MAX];
static size_t n_entries;

/* "*Key=*" alone on its line: an entry. */
static bool entry_key(const char *line, char *key, size_t size)
{
    size_t len = strlen(line);
    if (len < 4 || line[0] != '*' || strcmp(line + len - 2, "=*") != 0)
        return false;
    size_t name = len - 3;
    if (name == 0 || name >= size)
        return false;
    for (size_t i = 1; i <= name; i++)
        if (!((line[i] >= 'A' && line[i] <= 'Z') || (line[i] >= 'a' && line[i] <= 'z') ||
              (line[i] >= '0' && line[i] <= '9')))
            return false;
    memcpy(key, line + 1, name);
    key[name] = '\0';
    return true;
}

/* Runs before the tests, so it reports with messages rather than
 * assertions. */
static int read_manpage(void **state)
{
    (void)state;
    FILE *file = fopen(manpage_path, "re");
    if (!file) {
        fprintf(stderr, "cannot open %s: %s\n", manpage_path, strerror(errno));
        return -1;
    }
    _cleanup_free_ char *line = NULL;
    size_t cap = 0;
    char section[32] = "";
    documented *current = NULL;
    unsigned number = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, file)) >= 0) {
        number++;
        if (len > 0 && line[len - 1] == '\n')
            line[--len] = '\0';
        if (line[0] == '#' && line[1] == ' ') {
            /* A heading: "# [Host] SECTION OPTIONS" opens a section; any
             * other closes it. */
            current = NULL;
            section[0] = '\0';
            const char *open = line + 2, *close = strchr(line, ']');
            if (*open == '[' && close && strstr(close, "SECTION OPTIONS"))
                snprintf(section, sizeof(section), "%.*s", (int)(close - open - 1), open + 1);
            continue;
        }
        char key[64];
        if (entry_key(line, key, sizeof(key))) {
            if (!section[0]) {
                fprintf(stderr, "%s:%u: %s= is documented outside a [Section] SECTION OPTIONS\n",
                        manpage_path, number, key);
                fclose(file);
                return -1;
            }
            if (n_entries == DOCUMENTED_MAX) {
                fprintf(stderr, "%s: more than %d keys\n", manpage_path, DOCUMENTED_MAX);
                fclose(file);
                return -1;
            }
            current = &entries[n_entries++];
            *current = (documented){.line = number};
            snprintf(current->section, sizeof(current->section), "%s", section);
            snprintf(current->key, sizeof(current->key), "%s", key);
            continue;
        }
        if (!current)
            continue;
        const char *text = line + strspn(line, "\t ");
        if (strncmp(text, "Default:", 8) == 0)
            current->has_default = true;
        if (strncmp(text, "Example:", 8) == 0) {
            char sets[80];
            snprintf(sets, sizeof(sets), "*%s=", current->key);
            current->has_example = strstr(text, sets) != NULL;
        }
    }
    fclose(file);
    return 0;
}

static const documented *find(const char *section, const char *key)
{
    for (size_t i = 0; i < n_entries; i++)
        if (strcmp(entries[i].section, section) == 0 && strcmp(entries[i].key, key) == 0)
            return &entries[i];
    return NULL;
}

static bool parser_knows(const char *section, const char *key)
{
    const char *name, *in;
    for (size_t i = 0; (name = cfg_daemon_key_at(i, &in)); i++)
        if (strcmp(in, section) == 0 && strcmp(name, key) == 0)
            return true;
    for (size_t i = 0; (name = cfg_host_key_at(i, &in)); i++)
        if (strcmp(in, section) == 0 && strcmp(name, key) == 0)
            return true;
    return false;
}

static size_t check_documented(const char *(*key_at)(size_t, const char **))
{
    size_t missing = 0;
    const char *name, *section;
    for (size_t i = 0; (name = key_at(i, &section)); i++) {
        if (!find(section, name)) {
            fprintf(stderr,
                    "%s: [%s] %s= is accepted by the parser but not documented (add an entry "
                    "\"*%s=*\" under \"# [%s] SECTION OPTIONS\", with Default: and Example:)\n",
                    manpage_path, section, name, name, section);
            missing++;
        }
    }
    return missing;
}

static void every_daemon_key_is_documented(void **state)
{
    (void)state;
    assert_int_equal(check_documented(cfg_daemon_key_at), 0);
}

static void every_host_key_is_documented(void **state)
{
    (void)state;
    assert_int_equal(check_documented(cfg_host_key_at), 0);
}

static void every_documented_key_is_known(void **state)
{
    (void)state;
    size_t unknown = 0;
    for (size_t i = 0; i < n_entries; i++) {
        if (!parser_knows(entries[i].section, entries[i].key)) {
            fprintf(stderr, "%s:%u: [%s] %s= is documented but the parser does not accept it\n",
                    manpage_path, entries[i].line, entries[i].section, entries[i].key);
            unknown++;
        }
    }
    assert_int_equal(unknown, 0);
    /* The four sections are there, [Activator] with more than a few keys. */
    assert_non_null(find("Activator", "Box"));
    assert_non_null(find("Host", "Exec"));
    assert_non_null(find("Listen", "ListenStream"));
    assert_non_null(find("Limits", "MemoryMax"));
}

static void each_key_is_documented_once_with_default_and_example(void **state)
{
    (void)state;
    size_t problems = 0;
    for (size_t i = 0; i < n_entries; i++) {
        const documented *e = &entries[i];
        if (find(e->section, e->key) != e) {
            fprintf(stderr, "%s:%u: [%s] %s= is documented twice\n", manpage_path, e->line,
                    e->section, e->key);
            problems++;
        }
        if (!e->has_default || !e->has_example) {
            fprintf(stderr, "%s:%u: %s= lacks %s\n", manpage_path, e->line, e->key,
                    !e->has_default ? "a \"Default:\" paragraph"
                                    : "an \"Example:\" paragraph that sets it (*KEY=VALUE*)");
            problems++;
        }
    }
    assert_int_equal(problems, 0);
}

static void example_files_are_accepted(void **state)
{
    (void)state;
    cfg_daemon config;
    cfg_errors errors = {0};
    int r = cfg_load_daemon(daemon_example_path, &config, &errors);
    cfg_errors_print(&errors, stderr);
    assert_int_equal(r, 0);
    assert_int_equal(errors.n, 0);
    cfg_daemon_free(&config);

    _cleanup_free_ char *dir = strdup(host_example_path);
    assert_non_null(dir);
    char *slash = strrchr(dir, '/');
    assert_non_null(slash);
    *slash = '\0';
    cfg_host host;
    r = cfg_load_host_file(dir, slash + 1, &host, &errors);
    cfg_errors_print(&errors, stderr);
    assert_int_equal(r, 0);
    assert_int_equal(errors.n, 0);
    cfg_host_free(&host);
    cfg_errors_free(&errors);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr,
                "usage: %s activatord.conf.5.scd EXAMPLE-ACTIVATORD.CONF EXAMPLE-HOST.conf\n",
                argv[0]);
        return 2;
    }
    manpage_path = argv[1];
    daemon_example_path = argv[2];
    host_example_path = argv[3];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_daemon_key_is_documented),
        cmocka_unit_test(every_host_key_is_documented),
        cmocka_unit_test(every_documented_key_is_known),
        cmocka_unit_test(each_key_is_documented_once_with_default_and_example),
        cmocka_unit_test(example_files_are_accepted),
    };
    return cmocka_run_group_tests(tests, read_manpage, NULL);
}
