/* What a reload reads of the configuration beyond the parse: where each key
 * that is checked on this box was set, the accounts checked on this box
 * reported on their lines, and what changed between two loads of a host
 * file, sorted by when it can apply. */
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "activator/config/config.h"

static char tmp_dir[] = "/tmp/act-config-reload-XXXXXX";

static void write_file(const char *name, const char *content)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", tmp_dir, name);
    FILE *f = fopen(path, "we");
    assert_non_null(f);
    fputs(content, f);
    assert_int_equal(fclose(f), 0);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

static int setup(void **state)
{
    strcpy(tmp_dir, "/tmp/act-config-reload-XXXXXX");
    return mkdtemp(tmp_dir) ? 0 : -1;
}

static int teardown(void **state)
{
    return nftw(tmp_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Loads tmp_dir/<name>.conf after writing text there. */
static void load(const char *name, const char *text, cfg_host *out)
{
    char file[128];
    snprintf(file, sizeof(file), "%s.conf", name);
    write_file(file, text);
    cfg_errors errors = {0};
    int r = cfg_load_host_file(tmp_dir, file, out, &errors);
    cfg_errors_print(&errors, stderr);
    assert_int_equal(r, 0);
    cfg_errors_free(&errors);
}

static void lines_of_box_checked_keys_are_kept(void **state)
{
    cfg_host host;
    load("web1",
         "[Host]\n"                        /* 1 */
         "Exec=bin/server\n"               /* 2 */
         "User=nobody\n"                   /* 3 */
         "Group=nogroup\n"                 /* 4 */
         "[Listen]\n"                      /* 5 */
         "ListenStream=127.0.0.1:8001\n"   /* 6 */
         "# a comment\n"                   /* 7 */
         "ListenStream=/run/web1.sock\n"   /* 8 */
         "[Limits]\n"                      /* 9 */
         "PidsMax=64\n"                    /* 10 */
         "MemoryMax=64M\n"                 /* 11 */
         "SystemCallFilter=default ~ptrace\n", /* 12 */
         &host);
    assert_int_equal(host.lines.user, 3);
    assert_int_equal(host.lines.group, 4);
    assert_int_equal(host.n_listen, 2);
    assert_int_equal(host.listen_lines[0], 6);
    assert_int_equal(host.listen_lines[1], 8);
    assert_int_equal(host.lines.pids_max, 10);
    assert_int_equal(host.lines.memory_max, 11);
    assert_int_equal(host.lines.memory_high, 0);
    assert_int_equal(host.lines.system_call_filter, 12);
    cfg_host_free(&host);

    /* An empty ListenStream= clears the list, lines and all. */
    load("web2",
         "[Host]\nExec=bin/server\n[Listen]\nListenStream=127.0.0.1:8001\nListenStream=\n"
         "ListenStream=127.0.0.1:8002\n",
         &host);
    assert_int_equal(host.n_listen, 1);
    assert_int_equal(host.listen_lines[0], 6);
    cfg_host_free(&host);
}

static void the_daemon_file_keeps_its_key_lines(void **state)
{
    write_file("activatord.conf", "[Activator]\n\nBox=box-1\nMaxConcurrentStarts=3\n");
    char path[512];
    snprintf(path, sizeof(path), "%s/activatord.conf", tmp_dir);
    cfg_daemon config;
    cfg_errors errors = {0};
    assert_int_equal(cfg_load_daemon(path, &config, &errors), 0);
    assert_int_equal(cfg_daemon_key_line(&config, "Box"), 3);
    assert_int_equal(cfg_daemon_key_line(&config, "MaxConcurrentStarts"), 4);
    assert_int_equal(cfg_daemon_key_line(&config, "Store"), 0);
    assert_int_equal(cfg_daemon_key_line(&config, "Bogus"), 0);
    cfg_daemon_free(&config);
}

static void missing_accounts_are_reported_on_their_lines(void **state)
{
    char hosts_dir[512];
    snprintf(hosts_dir, sizeof(hosts_dir), "%s/hosts", tmp_dir);
    assert_int_equal(mkdir(hosts_dir, 0755), 0);
    write_file("hosts/good.conf", "[Host]\nExec=bin/a\nUser=root\nGroup=0\n");
    write_file("hosts/bad.conf", "[Host]\nExec=bin/a\n\nUser=nosuchuser_act\n");
    write_file("hosts/badgroup.conf", "[Host]\nExec=bin/a\nUser=root\nGroup=nosuchgroup_act\n");
    write_file("activatord.conf", "[Activator]\nBox=box-1\nControlGroup=nosuchgroup_act\n");
    char config_path[512];
    snprintf(config_path, sizeof(config_path), "%s/activatord.conf", tmp_dir);
    cfg_daemon config;
    cfg_errors errors = {0};
    assert_int_equal(cfg_load_daemon(config_path, &config, &errors), 0);
    free(config.hosts_directory);
    config.hosts_directory = strdup(hosts_dir);
    cfg_host *hosts = NULL;
    size_t n = 0;
    assert_int_equal(cfg_load_hosts(hosts_dir, &hosts, &n, &errors), 0);
    assert_int_equal(n, 3);
    assert_int_equal(cfg_check_accounts(config_path, &config, hosts, n, &errors), 3);
    assert_int_equal(errors.n, 3);
    char expected[3][700];
    snprintf(expected[0], sizeof(expected[0]),
             "%s/bad.conf:4: User: nosuchuser_act: no such user on this box", hosts_dir);
    snprintf(expected[1], sizeof(expected[1]),
             "%s/badgroup.conf:4: Group: nosuchgroup_act: no such group on this box", hosts_dir);
    snprintf(expected[2], sizeof(expected[2]),
             "%s:3: ControlGroup: nosuchgroup_act: no such group on this box", config_path);
    for (size_t i = 0; i < 3; i++)
        if (strncmp(errors.items[i].text, expected[i], strlen(expected[i])) != 0)
            fail_msg("problem %zu is \"%s\", expected \"%s...\"", i, errors.items[i].text,
                     expected[i]);
    cfg_hosts_free(hosts, n);
    cfg_errors_free(&errors);
    cfg_daemon_free(&config);
}

static const char base[] = "[Host]\n"
                           "Exec=bin/server --port 8001\n"
                           "Environment=A=1\n"
                           "StopTimeoutSec=3\n"
                           "[Listen]\n"
                           "ListenStream=127.0.0.1:8001\n"
                           "[Limits]\n"
                           "MemoryMax=64M\n";

/* base with one line replaced (or, with a NULL from, appended). */
static unsigned changes_after(const char *from, const char *to)
{
    char text[1024];
    if (from) {
        const char *at = strstr(base, from);
        assert_non_null(at);
        snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - base), base, to, at + strlen(from));
    } else {
        snprintf(text, sizeof(text), "%s%s", base, to);
    }
    cfg_host running, loaded;
    load("running", base, &running);
    load("loaded", text, &loaded);
    free(loaded.name);
    loaded.name = strdup("running");
    unsigned changes = cfg_host_changes(&running, &loaded);
    cfg_host_free(&running);
    cfg_host_free(&loaded);
    return changes;
}

static void changes_are_sorted_by_when_they_apply(void **state)
{
    /* The same file, moved about and commented: nothing changed. */
    assert_int_equal(changes_after("StopTimeoutSec=3\n", "# the grace\nStopTimeoutSec=3s\n"),
                     CFG_HOST_SAME);
    assert_int_equal(changes_after("ListenStream=127.0.0.1:8001\n",
                                   "ListenStream=127.0.0.1:8001\nListenStream=127.0.0.1:8002\n"),
                     CFG_HOST_CHANGED_LISTEN);
    assert_int_equal(changes_after("[Listen]\n", "[Listen]\nBacklog=16\n"),
                     CFG_HOST_CHANGED_LISTEN);
    assert_int_equal(changes_after("MemoryMax=64M\n", "MemoryMax=128M\n"),
                     CFG_HOST_CHANGED_LIMITS);
    assert_int_equal(changes_after(NULL, "PidsMax=10\n"), CFG_HOST_CHANGED_LIMITS);
    /* The filter is in [Limits] but is set at the exec. */
    assert_int_equal(changes_after(NULL, "SystemCallFilter=default ~ptrace\n"),
                     CFG_HOST_CHANGED_START);
    assert_int_equal(changes_after("--port 8001", "--port 8002"), CFG_HOST_CHANGED_START);
    assert_int_equal(changes_after("A=1", "A=2"), CFG_HOST_CHANGED_START);
    assert_int_equal(changes_after("StopTimeoutSec=3\n", "StopTimeoutSec=3\nReady=tcp:127.0.0.1:8001\n"),
                     CFG_HOST_CHANGED_START);
    assert_int_equal(changes_after("StopTimeoutSec=3\n", "User=nobody\n"), CFG_HOST_CHANGED_START);
    assert_int_equal(changes_after("MemoryMax=64M\n", "MemoryMax=1G\n[Host]\nMaxStarts=2\n"
                                                      "[Listen]\nListenStream=/run/x.sock\n"),
                     CFG_HOST_CHANGED_LISTEN | CFG_HOST_CHANGED_LIMITS | CFG_HOST_CHANGED_START);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(lines_of_box_checked_keys_are_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(the_daemon_file_keeps_its_key_lines, setup, teardown),
        cmocka_unit_test_setup_teardown(missing_accounts_are_reported_on_their_lines, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(changes_are_sorted_by_when_they_apply, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
