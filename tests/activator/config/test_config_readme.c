/* The README's configuration examples are accepted as written: the test reads
 * README.md itself (its path is argv[1]) and loads every ```ini block, so the
 * README and the parser cannot drift apart.
 *
 *   - a block starting with [Activator] is an activatord.conf;
 *   - a block without a section adds keys to that file (the etcd TLS and
 *     authentication keys, who may control the box): it is loaded with each
 *     etcd Store= form, and the absolute paths it names are made to exist
 *     under a temporary root;
 *   - a block starting with [Host] is a host file; all of them together
 *     form a hosts directory.
 * A line "KEY=VALUE  # or OTHER ..." offers OTHER as another form of KEY's
 * value: each block is also loaded with each such alternative. */
#include <errno.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "activator/config/config.h"
#include "common/cleanup.h"
#include "common/fileio.h"

#define EXAMPLES_MAX 32

static const char *readme_path;
static char tmp_dir[] = "/tmp/act-config-readme-XXXXXX";

typedef enum block_kind {
    BLOCK_DAEMON,
    BLOCK_DAEMON_ADDITIONS,
    BLOCK_HOST,
    N_BLOCK_KINDS,
} block_kind;

typedef struct examples {
    char *text[EXAMPLES_MAX];
    size_t n;
} examples;

/* Per kind: the blocks as written, and every form (each block as written,
 * then with each of its alternatives). */
static examples written[N_BLOCK_KINDS], forms[N_BLOCK_KINDS];

static block_kind kind_of(const char *block)
{
    if (strncmp(block, "[Activator]", 11) == 0)
        return BLOCK_DAEMON;
    if (strncmp(block, "[Host]", 6) == 0)
        return BLOCK_HOST;
    return BLOCK_DAEMON_ADDITIONS;
}

/* Takes text over; -1 (with a message) when the list is full. */
static int add_example(examples *list, char *text)
{
    if (!text || list->n == EXAMPLES_MAX) {
        fprintf(stderr, "README.md has more than %d ini examples of a kind\n", EXAMPLES_MAX);
        free(text);
        return -1;
    }
    list->text[list->n++] = text;
    return 0;
}

/* Adds the block, then the block with KEY=OTHER for each of its lines
 * "KEY=VALUE  # or OTHER ...". */
static int add_forms(examples *list, const char *block)
{
    if (add_example(list, strdup(block)) < 0)
        return -1;
    for (const char *line = block; *line;) {
        size_t len = strcspn(line, "\n");
        const char *next = line + len + (line[len] == '\n');
        const char *eq = memchr(line, '=', len);
        const char *alt = strstr(line, "# or ");
        if (eq && alt && alt < line + len) {
            alt += strlen("# or ");
            char *form = NULL;
            if (asprintf(&form, "%.*s%.*s\n%s", (int)(eq + 1 - block), block,
                         (int)strcspn(alt, " \t\n"), alt, next) < 0)
                form = NULL;
            if (add_example(list, form) < 0)
                return -1;
        }
        line = next;
    }
    return 0;
}

static int add_block(char *block)
{
    block_kind kind = kind_of(block);
    if (add_forms(&forms[kind], block) < 0)
        return -1;
    return add_example(&written[kind], block);
}

/* Collects the lines between "```ini" and the closing "```". Runs before
 * the tests, so it reports with messages rather than assertions. */
static int read_ini_blocks(const char *path)
{
    FILE *file = fopen(path, "re");
    if (!file) {
        fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    _cleanup_free_ char *line = NULL;
    size_t cap = 0, block_len = 0;
    char *block = NULL;
    FILE *block_stream = NULL;
    int r = 0;
    while (r == 0 && getline(&line, &cap, file) >= 0) {
        if (!block_stream && strncmp(line, "```ini", 6) == 0) {
            block_stream = open_memstream(&block, &block_len);
            r = block_stream ? 0 : -1;
        } else if (block_stream && strncmp(line, "```", 3) == 0) {
            fclose(block_stream);
            block_stream = NULL;
            r = add_block(block);
            block = NULL;
        } else if (block_stream) {
            fputs(line, block_stream);
        }
    }
    fclose(file);
    if (block_stream) {
        fclose(block_stream);
        fprintf(stderr, "%s has an ini block that is never closed\n", path);
        r = -1;
    }
    free(block);
    return r;
}

static void write_file(const char *path, const char *content)
{
    FILE *f = fopen(path, "we");
    assert_non_null(f);
    fputs(content, f);
    assert_int_equal(fclose(f), 0);
}

static void assert_daemon_accepts(const char *content)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/activatord.conf", tmp_dir);
    write_file(path, content);
    cfg_daemon config;
    cfg_errors errors = {0};
    int r = cfg_load_daemon(path, &config, &errors);
    if (r != 0 || errors.n) {
        cfg_errors_print(&errors, stderr);
        fail_msg("the README's activatord.conf was refused:\n%s", content);
    }
    cfg_daemon_free(&config);
}

/* Each "KEY=/absolute/path" line points below tmp_dir instead, where the
 * file is created: the keys that name files check that they exist. */
static char *with_files_made(const char *block)
{
    char *out = NULL;
    size_t out_len = 0;
    FILE *stream = open_memstream(&out, &out_len);
    assert_non_null(stream);
    for (const char *line = block; *line;) {
        size_t len = strcspn(line, "\n");
        const char *eq = memchr(line, '=', len);
        if (eq && eq[1] == '/') {
            char file[1024];
            snprintf(file, sizeof(file), "%s%.*s", tmp_dir, (int)strcspn(eq + 1, " \t\n"), eq + 1);
            _cleanup_free_ char *dir = strndup(file, (size_t)(strrchr(file, '/') - file));
            assert_int_equal(act_mkdir_p(dir, 0755, NULL), 0);
            write_file(file, "made by the test\n");
            fprintf(stream, "%.*s%s%.*s\n", (int)(eq + 1 - line), line, tmp_dir,
                    (int)(line + len - eq - 1), eq + 1);
        } else {
            fprintf(stream, "%.*s\n", (int)len, line);
        }
        line += len + (line[len] == '\n');
    }
    assert_int_equal(fclose(stream), 0);
    return out;
}

static int setup(void **state)
{
    (void)state;
    strcpy(tmp_dir, "/tmp/act-config-readme-XXXXXX");
    return mkdtemp(tmp_dir) ? 0 : -1;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int teardown(void **state)
{
    (void)state;
    return nftw(tmp_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void readme_has_the_examples(void **state)
{
    (void)state;
    for (block_kind kind = 0; kind < N_BLOCK_KINDS; kind++)
        assert_true(written[kind].n >= 1);
}

static void daemon_examples_are_accepted(void **state)
{
    (void)state;
    size_t etcd_forms = 0;
    for (size_t i = 0; i < forms[BLOCK_DAEMON].n; i++) {
        assert_daemon_accepts(forms[BLOCK_DAEMON].text[i]);
        etcd_forms += strstr(forms[BLOCK_DAEMON].text[i], "Store=etcd://") != NULL;
    }
    /* The commented alternative, the fleet's Store=, is among them. */
    assert_true(etcd_forms >= 1);
}

static void etcd_access_examples_are_accepted(void **state)
{
    (void)state;
    size_t loaded = 0;
    for (size_t a = 0; a < written[BLOCK_DAEMON_ADDITIONS].n; a++) {
        _cleanup_free_ char *additions = with_files_made(written[BLOCK_DAEMON_ADDITIONS].text[a]);
        for (size_t d = 0; d < forms[BLOCK_DAEMON].n; d++) {
            const char *daemon = forms[BLOCK_DAEMON].text[d];
            if (!strstr(daemon, "Store=etcd://"))
                continue;
            _cleanup_free_ char *content = NULL;
            assert_true(asprintf(&content, "%s%s", daemon, additions) > 0);
            assert_daemon_accepts(content);
            loaded++;
        }
    }
    assert_true(loaded >= 1);
}

/* Each form alone (alternatives may bind the same address), then the blocks
 * as written together in one hosts directory. */
static void host_examples_are_accepted(void **state)
{
    (void)state;
    for (size_t i = 0; i < forms[BLOCK_HOST].n; i++) {
        char name[64], path[640];
        snprintf(name, sizeof(name), "form%zu.conf", i);
        snprintf(path, sizeof(path), "%s/%s", tmp_dir, name);
        write_file(path, forms[BLOCK_HOST].text[i]);
        cfg_host host;
        cfg_errors errors = {0};
        if (cfg_load_host_file(tmp_dir, name, &host, &errors) != 0) {
            cfg_errors_print(&errors, stderr);
            fail_msg("the README's host file was refused:\n%s", forms[BLOCK_HOST].text[i]);
        }
        cfg_host_free(&host);
    }
    char hosts_dir[512];
    snprintf(hosts_dir, sizeof(hosts_dir), "%s/hosts", tmp_dir);
    assert_int_equal(mkdir(hosts_dir, 0755), 0);
    for (size_t i = 0; i < written[BLOCK_HOST].n; i++) {
        char path[640];
        snprintf(path, sizeof(path), "%s/host%zu.conf", hosts_dir, i);
        write_file(path, written[BLOCK_HOST].text[i]);
    }
    cfg_host *hosts = NULL;
    size_t n = 0;
    cfg_errors errors = {0};
    assert_int_equal(cfg_load_hosts(hosts_dir, &hosts, &n, &errors), 0);
    cfg_errors_print(&errors, stderr);
    assert_int_equal(errors.n, 0);
    assert_int_equal(n, written[BLOCK_HOST].n);
    cfg_hosts_free(hosts, n);
}

static int read_readme(void **state)
{
    (void)state;
    return read_ini_blocks(readme_path);
}

static void examples_free(examples *list)
{
    for (size_t i = 0; i < list->n; i++)
        free(list->text[i]);
    list->n = 0;
}

static int free_readme(void **state)
{
    (void)state;
    for (block_kind kind = 0; kind < N_BLOCK_KINDS; kind++) {
        examples_free(&written[kind]);
        examples_free(&forms[kind]);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s README.md\n", argv[0]);
        return 2;
    }
    readme_path = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(readme_has_the_examples),
        cmocka_unit_test_setup_teardown(daemon_examples_are_accepted, setup, teardown),
        cmocka_unit_test_setup_teardown(etcd_access_examples_are_accepted, setup, teardown),
        cmocka_unit_test_setup_teardown(host_examples_are_accepted, setup, teardown),
    };
    return cmocka_run_group_tests(tests, read_readme, free_readme);
}
