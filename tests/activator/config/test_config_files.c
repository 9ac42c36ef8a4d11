/* Tests of activatord.conf and host files read from real files: every key
 * good and bad, the file:line of each error, all errors of a file reported,
 * bad host files skipped while good ones load, traversal names refused; and
 * what a reload reads beyond the parse: the lines of the keys checked on
 * this box, the accounts reported on their lines, and what changed between
 * two loads of a host file. */
#include <errno.h>
#include <fcntl.h>
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
#include "activator/config/parse/duration.h"
#include "common/cleanup.h"
#include "common/split-argv.h"
#include "common/strv.h"

static char tmp_dir[] = "/tmp/act-config-test-XXXXXX";

static void write_file(const char *name, const char *content)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", tmp_dir, name);
    FILE *f = fopen(path, "we");
    assert_non_null(f);
    fputs(content, f);
    assert_int_equal(fclose(f), 0);
}

static char *path_of(const char *name)
{
    static char path[512];
    snprintf(path, sizeof(path), "%s/%s", tmp_dir, name);
    return path;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int setup(void **state)
{
    (void)state;
    strcpy(tmp_dir, "/tmp/act-config-test-XXXXXX");
    return mkdtemp(tmp_dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return nftw(tmp_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* The error at index i reads "PATH:LINE: KEY: ..." exactly. */
static void assert_error_at(const cfg_errors *errors, size_t i, const char *file, unsigned line,
                            const char *key)
{
    assert_true(i < errors->n);
    const cfg_error *e = &errors->items[i];
    char prefix[600];
    if (line)
        snprintf(prefix, sizeof(prefix), "%s:%u: %s: ", file, line, key);
    else
        snprintf(prefix, sizeof(prefix), "%s: %s: ", file, key);
    if (strncmp(e->text, prefix, strlen(prefix)) != 0)
        fail_msg("error %zu is \"%s\", expected it to start with \"%s\"", i, e->text, prefix);
    assert_int_equal(e->line, line);
    assert_string_equal(e->key, key);
    /* Each says what to do. */
    assert_non_null(strchr(e->text, '('));
}

static void daemon_defaults(void **state)
{
    (void)state;
    write_file("d.conf", "[Activator]\nBox=box-1\n");
    cfg_daemon c;
    cfg_errors errors = {0};
    assert_int_equal(cfg_load_daemon(path_of("d.conf"), &c, &errors), 0);
    assert_int_equal(errors.n, 0);
    assert_string_equal(c.box, "box-1");
    assert_string_equal(c.store, "dir:///var/lib/activator/claims");
    assert_string_equal(c.state_directory, "/var/lib/activator");
    assert_string_equal(c.runtime_directory, "/run/activator");
    assert_string_equal(c.hosts_directory, "/etc/activator/hosts");
    assert_null(c.cgroup_root);
    assert_true(c.claim_unclaimed);
    assert_string_equal(c.control, "ipc:///run/activator/control.ipc");
    assert_string_equal(c.events, "ipc:///run/activator/events.ipc");
    assert_null(c.control_group);
    assert_null(c.viewer_group);
    assert_null(c.control_listen);
    assert_null(c.control_operators);
    assert_null(c.control_viewers);
    assert_false(c.store_insecure);
    assert_string_equal(c.metrics_listen, "127.0.0.1:9464");
    assert_int_equal(c.max_concurrent_starts, 2 * sysconf(_SC_NPROCESSORS_ONLN));
    assert_int_equal(c.failure_backoff_max_usec, 30 * CFG_USEC_PER_SEC);
    assert_int_equal(c.failure_reset_usec, 10 * CFG_USEC_PER_SEC);
    assert_int_equal(c.box_lease_usec, 10 * CFG_USEC_PER_SEC);
    cfg_daemon_free(&c);
}

static void daemon_every_key(void **state)
{
    (void)state;
    /* The sample, inline comments included, plus every other key. */
    write_file("d.conf", "# activatord.conf\n"
                         "[Activator]\n"
                         "Box=box-1\n"
                         "StateDirectory=/srv/act           # releases/, hosts/, claims/\n"
                         "RuntimeDirectory=/run/act2\n"
                         "HostsDirectory=/srv/act/hosts\n"
                         "CgroupRoot=/sys/fs/cgroup/act.slice\n"
                         "ClaimUnclaimed=n ; fleet mode (systemd's short form)\n"
                         "Events=tcp://127.0.0.1:7001\n"
                         "ControlGroup=activator\n"
                         "ViewerGroup=activator-view\n"
                         "ControlListen=tls+tcp://0.0.0.0:7443\n"
                         "ControlOperators=ops-1 \"ops two\"\n"
                         "ControlViewers=viewer-1\n"
                         "ControlOperators=ops-3\n"
                         "TLSCertificate=/etc/activator/tls/cert.pem\n"
                         "TLSKey=/etc/activator/tls/key.pem\n"
                         "TLSClientCA=/etc/activator/tls/ca.pem\n"
                         "MetricsListen=[::1]:9100\n"
                         "MaxConcurrentStarts=7\n"
                         "FailureBackoffMaxSec=1min\n"
                         "FailureResetSec=20s\n"
                         "BoxLeaseSec=1min 30s\n"
                         "FailoverGraceSec=20s\n"
                         "StoreWatchTimeoutSec=5s\n");
    cfg_daemon c;
    cfg_errors errors = {0};
    assert_int_equal(cfg_load_daemon(path_of("d.conf"), &c, &errors), 0);
    cfg_errors_print(&errors, stderr);
    assert_int_equal(errors.n, 0);
    assert_string_equal(c.store, "dir:///srv/act/claims"); /* follows StateDirectory= */
    assert_string_equal(c.state_directory, "/srv/act");
    assert_string_equal(c.control, "ipc:///run/act2/control.ipc");
    assert_string_equal(c.events, "tcp://127.0.0.1:7001");
    assert_string_equal(c.hosts_directory, "/srv/act/hosts");
    assert_string_equal(c.cgroup_root, "/sys/fs/cgroup/act.slice");
    assert_false(c.claim_unclaimed);
    assert_string_equal(c.control_group, "activator");
    assert_string_equal(c.viewer_group, "activator-view");
    assert_string_equal(c.control_listen, "tls+tcp://0.0.0.0:7443");
    assert_int_equal(act_strv_length(c.control_operators), 3);
    assert_string_equal(c.control_operators[0], "ops-1");
    assert_string_equal(c.control_operators[1], "ops two");
    assert_string_equal(c.control_operators[2], "ops-3");
    assert_int_equal(act_strv_length(c.control_viewers), 1);
    assert_string_equal(c.control_viewers[0], "viewer-1");
    assert_string_equal(c.tls_certificate, "/etc/activator/tls/cert.pem");
    assert_string_equal(c.tls_key, "/etc/activator/tls/key.pem");
    assert_string_equal(c.tls_client_ca, "/etc/activator/tls/ca.pem");
    assert_string_equal(c.metrics_listen, "[::1]:9100");
    assert_int_equal(c.max_concurrent_starts, 7);
    assert_int_equal(c.failure_backoff_max_usec, 60 * CFG_USEC_PER_SEC);
    assert_int_equal(c.failure_reset_usec, 20 * CFG_USEC_PER_SEC);
    assert_int_equal(c.box_lease_usec, 90 * CFG_USEC_PER_SEC);
    assert_int_equal(c.failover_grace_usec, 20 * CFG_USEC_PER_SEC);
    assert_int_equal(c.store_watch_timeout_usec, 5 * CFG_USEC_PER_SEC);
    cfg_daemon_free(&c);

    write_file("d2.conf", "[Activator]\nBox=b\nStore=etcd://127.0.0.1:2379/activator\n"
                          "Control=ipc:///tmp/c.ipc\nCgroupRoot=auto\nMetricsListen=no\n");
    assert_int_equal(cfg_load_daemon(path_of("d2.conf"), &c, &errors), 0);
    assert_string_equal(c.store, "etcd://127.0.0.1:2379/activator");
    assert_string_equal(c.control, "ipc:///tmp/c.ipc");
    assert_null(c.cgroup_root);
    assert_null(c.metrics_listen);
    assert_int_equal(c.store_watch_timeout_usec, 30 * CFG_USEC_PER_SEC);
    cfg_daemon_free(&c);
    cfg_errors_free(&errors);
}

/* One bad value per key: each file has the bad line on line 3 and nothing
 * else wrong, so exactly one error naming line 3 and the key must come back. */
static void daemon_each_bad_key(void **state)
{
    (void)state;
    static const struct {
        const char *key, *value;
    } bad[] = {
        {"Box", "../box"},
        {"Box", ".hidden"},
        {"Store", "s3://bucket"},
        {"Store", "dir://relative/path"},
        {"Store", "etcd://10.0.0.5:2379"},
        {"Store", "etcd://10.0.0.5:2379,/activator"},
        {"StateDirectory", "var/lib"},
        {"RuntimeDirectory", "/run/../etc"},
        {"HostsDirectory", "hosts"},
        {"CgroupRoot", "relative"},
        {"ClaimUnclaimed", "perhaps"},
        {"Control", "tcp://127.0.0.1:1"},
        {"Control", "ipc://relative"},
        {"Events", "udp://x:1"},
        {"ControlGroup", "bad group"},
        {"ViewerGroup", "-view"},
        {"StoreInsecure", "perhaps"},
        {"ControlListen", "tcp://0.0.0.0:7443"},
        {"TLSCertificate", "cert.pem"},
        {"StoreCA", "ca.pem"},
        {"StoreUser", "two words"},
        {"StorePasswordFile", "password"},
        {"MetricsListen", "localhost:9464"},
        {"MetricsListen", "127.0.0.1"},
        {"MaxConcurrentStarts", "0"},
        {"MaxConcurrentStarts", "many"},
        {"FailureBackoffMaxSec", "2 fortnights"},
        {"FailureBackoffMaxSec", "2d"},
        {"FailureResetSec", "0"},
        {"BoxLeaseSec", "1s"},
        {"BoxLeaseSec", "2h"},
        /* Below the default lease's self-fencing margin (2 s). */
        {"FailoverGraceSec", "1s"},
        {"FailoverGraceSec", "soon"},
        {"StoreWatchTimeoutSec", "100ms"},
        {"StoreWatchTimeoutSec", "never"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        char content[512];
        snprintf(content, sizeof(content), "[Activator]\nBox=box-1\n%s=%s\n", bad[i].key,
                 bad[i].value);
        if (strcmp(bad[i].key, "Box") == 0)
            snprintf(content, sizeof(content), "[Activator]\n\n%s=%s\n", bad[i].key, bad[i].value);
        write_file("bad.conf", content);
        cfg_daemon c;
        cfg_errors errors = {0};
        assert_int_equal(cfg_load_daemon(path_of("bad.conf"), &c, &errors), -EINVAL);
        if (errors.n != 1) {
            cfg_errors_print(&errors, stderr);
            fail_msg("%s=%s gave %zu errors, expected 1", bad[i].key, bad[i].value, errors.n);
        }
        assert_error_at(&errors, 0, path_of("bad.conf"), 3, bad[i].key);
        assert_null(c.box); /* nothing half-read is handed out */
        cfg_errors_free(&errors);
    }
}

static void daemon_all_errors_of_a_file(void **state)
{
    (void)state;
    char long_line[400];
    memset(long_line, 'x', sizeof(long_line) - 1);
    long_line[sizeof(long_line) - 1] = '\0';
    char content[2048];
    snprintf(content, sizeof(content),
             "Box=early\n"                    /* 1: before any section */
             "[Activator]\n"                  /* 2 */
             "box=lowercase\n"                /* 3: case-sensitive key */
             "Frobnicate=yes\n"               /* 4: unknown key */
             "MaxConcurrentStarts=-3\n"       /* 5: bad value */
             "this line has no equals sign\n" /* 6: syntax */
             "StateDirectory=\n"              /* 7: empty */
             "MaxConcurrentStarts=4\n"        /* 8: set twice */
             "Store=%s\n"                     /* 9: too long */
             "[Nonsense]\n"                   /* 10: unknown section */
             "Anything=goes\n"                /* 11: not reported again */
             "[Activator\n"                   /* 12: broken header */
             "TLSKey=/k.pem\n",               /* 13: under no section; then TLS w/o listen */
             long_line);
    write_file("many.conf", content);
    cfg_daemon c;
    cfg_errors errors = {0};
    assert_int_equal(cfg_load_daemon(path_of("many.conf"), &c, &errors), -EINVAL);
    cfg_errors_print(&errors, stderr);
    const char *f = path_of("many.conf");
    size_t i = 0;
    assert_error_at(&errors, i++, f, 1, "Box");
    assert_error_at(&errors, i++, f, 3, "box");
    assert_non_null(strstr(errors.items[1].text, "did you mean Box?"));
    assert_error_at(&errors, i++, f, 4, "Frobnicate");
    assert_error_at(&errors, i++, f, 5, "MaxConcurrentStarts");
    assert_int_equal(errors.items[i].line, 6);
    assert_null(errors.items[i++].key);
    assert_error_at(&errors, i++, f, 7, "StateDirectory");
    assert_error_at(&errors, i++, f, 8, "MaxConcurrentStarts");
    assert_non_null(strstr(errors.items[i - 1].text, "first on line 5"));
    assert_int_equal(errors.items[i].line, 9);
    assert_non_null(strstr(errors.items[i++].text, "longer than"));
    assert_error_at(&errors, i++, f, 10, "[Nonsense]");
    assert_int_equal(errors.items[i++].line, 12);
    /* Cross-key and missing-key problems come after the line-by-line ones. */
    assert_error_at(&errors, i++, f, 0, "Box");
    assert_int_equal(errors.n, i);
    assert_int_equal(cfg_errors_count_file(&errors, f), errors.n);
    cfg_errors_free(&errors);
}

static void daemon_cross_key_rules(void **state)
{
    (void)state;
    write_file("tls.conf", "[Activator]\nBox=b\nControlListen=tls+tcp://0.0.0.0:7443\n"
                           "TLSKey=/k.pem\nControlOperators=ops-1\n");
    cfg_daemon c;
    cfg_errors errors = {0};
    assert_int_equal(cfg_load_daemon(path_of("tls.conf"), &c, &errors), -EINVAL);
    assert_int_equal(errors.n, 2); /* TLSCertificate= and TLSClientCA= missing */
    assert_error_at(&errors, 0, path_of("tls.conf"), 3, "ControlListen");
    assert_non_null(strstr(errors.items[0].text, "TLSCertificate"));
    assert_non_null(strstr(errors.items[1].text, "TLSClientCA"));
    cfg_errors_free(&errors);

    write_file("tls2.conf", "[Activator]\nBox=b\nTLSCertificate=/c.pem\n");
    assert_int_equal(cfg_load_daemon(path_of("tls2.conf"), &c, &errors), -EINVAL);
    assert_int_equal(errors.n, 1);
    assert_error_at(&errors, 0, path_of("tls2.conf"), 3, "ControlListen");
    cfg_errors_free(&errors);

    /* A RuntimeDirectory= too long for the derived ipc socket path. */
    char content[512], dir[200];
    memset(dir, 'r', sizeof(dir) - 1);
    dir[0] = '/';
    dir[120] = '\0';
    snprintf(content, sizeof(content), "[Activator]\nBox=b\nRuntimeDirectory=%s\n", dir);
    write_file("rt.conf", content);
    assert_int_equal(cfg_load_daemon(path_of("rt.conf"), &c, &errors), -EINVAL);
    assert_true(errors.n >= 1);
    assert_error_at(&errors, 0, path_of("rt.conf"), 3, "RuntimeDirectory");
    cfg_errors_free(&errors);
}

/* Loads name, which must fail with exactly one error, on line at key,
 * whose text holds words. */
static void expect_one_error(const char *name, unsigned line, const char *key, const char *words)
{
    cfg_daemon c;
    cfg_errors errors = {0};
    assert_int_equal(cfg_load_daemon(path_of(name), &c, &errors), -EINVAL);
    if (errors.n != 1 || !strstr(errors.items[0].text, words)) {
        cfg_errors_print(&errors, stderr);
        fail_msg("%s: expected one error saying \"%s\"", name, words);
    }
    char file[512];
    snprintf(file, sizeof(file), "%s", path_of(name));
    assert_error_at(&errors, 0, file, line, key);
    cfg_errors_free(&errors);
}

/* Writes name: remote control over TLS on lines 1 to 6, then lines. */
static void write_remote_conf(const char *name, const char *lines)
{
    char content[1024];
    snprintf(content, sizeof(content),
             "[Activator]\nBox=b\nControlListen=tls+tcp://0.0.0.0:7443\nTLSCertificate=/c.pem\n"
             "TLSKey=/k.pem\nTLSClientCA=/ca.pem\n%s",
             lines);
    write_file(name, content);
}

/* ViewerGroup=, ControlOperators= and ControlViewers=: who gets which role. */
static void daemon_control_roles(void **state)
{
    (void)state;
    write_remote_conf("nobody.conf", "");
    expect_one_error("nobody.conf", 3, "ControlListen", "no client certificate would have a role");

    write_file("unused.conf", "[Activator]\nBox=b\nControlViewers=viewer-1\n");
    expect_one_error("unused.conf", 3, "ControlViewers", "ControlListen= is not set");

    write_remote_conf("both.conf", "ControlOperators=ops-1 both\nControlViewers=viewer-1 both\n");
    expect_one_error("both.conf", 8, "ControlViewers", "\"both\" is in ControlOperators=");

    /* A CN longer than X.509 allows, and one with a control character. */
    char too_long[128];
    snprintf(too_long, sizeof(too_long), "ControlOperators=ops-1 %065d\n", 0);
    write_remote_conf("long.conf", too_long);
    expect_one_error("long.conf", 7, "ControlOperators", "is not a certificate CN");
    write_remote_conf("tab.conf", "ControlViewers=\"tab\\there\"\n");
    expect_one_error("tab.conf", 7, "ControlViewers", "is not a certificate CN");

    /* An empty value clears the list; a later line starts it again. */
    write_remote_conf("cleared.conf",
                      "ControlOperators=ops-1\nControlOperators=\nControlOperators=\"ops two\"\n");
    cfg_daemon c;
    cfg_errors errors = {0};
    assert_int_equal(cfg_load_daemon(path_of("cleared.conf"), &c, &errors), 0);
    assert_int_equal(act_strv_length(c.control_operators), 1);
    assert_string_equal(c.control_operators[0], "ops two");
    cfg_daemon_free(&c);

    write_file("same.conf", "[Activator]\nBox=b\nControlGroup=activator\nViewerGroup=activator\n");
    expect_one_error("same.conf", 4, "ViewerGroup", "operators already");

    /* Resolved on this box: a group that is not there, and one group under
     * a name and a number. */
    write_file("groups.conf",
               "[Activator]\nBox=b\nControlGroup=root\nViewerGroup=nosuchgroup_act\n");
    assert_int_equal(cfg_load_daemon(path_of("groups.conf"), &c, &errors), 0);
    gid_t control_gid = 1, viewer_gid = 1;
    act_error err = {0};
    assert_int_equal(cfg_resolve_control_groups(&c, &control_gid, &viewer_gid, &err), -ENOENT);
    assert_non_null(strstr(err.message, "ViewerGroup=nosuchgroup_act"));
    cfg_daemon_free(&c);
    write_file("alias.conf", "[Activator]\nBox=b\nControlGroup=root\nViewerGroup=0\n");
    assert_int_equal(cfg_load_daemon(path_of("alias.conf"), &c, &errors), 0);
    assert_int_equal(cfg_resolve_control_groups(&c, &control_gid, &viewer_gid, &err), -EINVAL);
    assert_non_null(strstr(err.message, "ViewerGroup=0 is ControlGroup=root"));
    cfg_daemon_free(&c);
    write_file("viewers.conf", "[Activator]\nBox=b\nViewerGroup=0\n");
    assert_int_equal(cfg_load_daemon(path_of("viewers.conf"), &c, &errors), 0);
    assert_int_equal(cfg_resolve_control_groups(&c, &control_gid, &viewer_gid, &err), 0);
    assert_int_equal(viewer_gid, 0);
    cfg_daemon_free(&c);
    assert_int_equal(errors.n, 0);
}

/* An etcd Store='s TLS and authentication keys: read as given with etcd,
 * refused with a dir store, in their pairs, and their files must exist. */
static void daemon_store_access_keys(void **state)
{
    (void)state;
    write_file("ca.pem", "not checked here\n");
    write_file("password", "secret\n");
    /* path_of() reuses one buffer: keep copies. */
    char ca[512], password[512];
    snprintf(ca, sizeof(ca), "%s", path_of("ca.pem"));
    snprintf(password, sizeof(password), "%s", path_of("password"));
    char content[4096];
    snprintf(content, sizeof(content),
             "[Activator]\nBox=b\nStore=etcd://10.0.0.1:2379/activator\nStoreCA=%s\n"
             "StoreCertificate=%s\nStoreKey=%s\nStoreUser=activator\nStorePasswordFile=%s\n",
             ca, ca, ca, password);
    write_file("etcd.conf", content);
    cfg_daemon c;
    cfg_errors errors = {0};
    assert_int_equal(cfg_load_daemon(path_of("etcd.conf"), &c, &errors), 0);
    assert_string_equal(c.store_ca, ca);
    assert_string_equal(c.store_certificate, ca);
    assert_string_equal(c.store_key, ca);
    assert_string_equal(c.store_user, "activator");
    assert_string_equal(c.store_password_file, password);
    cfg_daemon_free(&c);

    /* With the dir store they would do nothing: each is an error. */
    snprintf(content, sizeof(content), "[Activator]\nBox=b\nStoreCA=%s\n", ca);
    write_file("dir.conf", content);
    assert_int_equal(cfg_load_daemon(path_of("dir.conf"), &c, &errors), -EINVAL);
    assert_int_equal(errors.n, 1);
    assert_error_at(&errors, 0, path_of("dir.conf"), 3, "StoreCA");
    assert_non_null(strstr(errors.items[0].text, "etcd"));
    cfg_errors_free(&errors);

    /* A certificate without its key, a user without a password file, and a
     * CA file that is not there. */
    snprintf(content, sizeof(content),
             "[Activator]\nBox=b\nStore=etcd://10.0.0.1:2379/a\nStoreCertificate=%s\n"
             "StoreUser=activator\nStoreCA=/nonexistent/ca.pem\n",
             ca);
    write_file("pairs.conf", content);
    assert_int_equal(cfg_load_daemon(path_of("pairs.conf"), &c, &errors), -EINVAL);
    assert_int_equal(errors.n, 3);
    assert_error_at(&errors, 0, path_of("pairs.conf"), 6, "StoreCA");
    assert_non_null(strstr(errors.items[0].text, "/nonexistent/ca.pem"));
    assert_error_at(&errors, 1, path_of("pairs.conf"), 4, "StoreCertificate");
    assert_non_null(strstr(errors.items[1].text, "StoreKey"));
    assert_error_at(&errors, 2, path_of("pairs.conf"), 5, "StoreUser");
    assert_non_null(strstr(errors.items[2].text, "StorePasswordFile"));
    cfg_errors_free(&errors);

    /* A user's password over plain http: refused unless StoreInsecure=yes
     * says the network is trusted; a client certificate alone means https. */
    static const char user[] = "[Activator]\nBox=b\nStore=etcd://10.0.0.1:2379/a\n"
                               "StoreUser=activator\nStorePasswordFile=%s\n%s";
    snprintf(content, sizeof(content), user, password, "");
    write_file("clear.conf", content);
    expect_one_error("clear.conf", 4, "StoreUser", "would send the etcd password in clear");
    snprintf(content, sizeof(content), user, password, "StoreInsecure=yes\n");
    write_file("insecure.conf", content);
    assert_int_equal(cfg_load_daemon(path_of("insecure.conf"), &c, &errors), 0);
    assert_true(c.store_insecure);
    cfg_daemon_free(&c);
    char client[2048];
    snprintf(client, sizeof(client), "StoreCertificate=%s\nStoreKey=%s\n", ca, ca);
    snprintf(content, sizeof(content), user, password, client);
    write_file("client.conf", content);
    assert_int_equal(cfg_load_daemon(path_of("client.conf"), &c, &errors), 0);
    assert_false(c.store_insecure);
    cfg_daemon_free(&c);
    assert_int_equal(errors.n, 0);
}

static void daemon_missing_file(void **state)
{
    (void)state;
    cfg_daemon c;
    cfg_errors errors = {0};
    assert_int_equal(cfg_load_daemon(path_of("absent.conf"), &c, &errors), -ENOENT);
    assert_int_equal(errors.n, 1);
    assert_non_null(strstr(errors.items[0].text, "absent.conf: cannot open"));
    cfg_errors_free(&errors);
}

static const char *const good_host = "[Host]\n"
                                     "Exec=bin/server --port 8080 --title 'web one'\n"
                                     "Environment=MODE=prod \"GREETING=hello world\"\n"
                                     "Environment=MODE=staging\n"
                                     "User=web1\n"
                                     "Group=web1\n"
                                     "Ready=tcp:127.0.0.1:8080\n"
                                     "ReadyTimeoutSec=20\n"
                                     "HealthCheck=exec:/usr/lib/web1/check --fast\n"
                                     "HealthCheckIntervalSec=15s\n"
                                     "HealthCheckFailures=5\n"
                                     "WatchdogSec=20s\n"
                                     "StopTimeoutSec=5s\n"
                                     "IdleTimeoutSec=0\n"
                                     "MaxStarts=3\n"
                                     "ExecRestore=/usr/lib/web1/restore --from s3\n"
                                     "ExecReplicate=/usr/lib/web1/replicate\n"
                                     "StartRateLimit=2.5\n"
                                     "PrivateIPC=no\n"
                                     "PrivateNetwork=yes\n"
                                     "[Listen]\n"
                                     "ListenStream=127.0.0.1:8080\n"
                                     "ListenStream=[::1]:8080\n"
                                     "ListenStream=/run/web1.sock\n"
                                     "ListenStream=8081\n"
                                     "Backlog=512\n"
                                     "[Limits]\n"
                                     "MemoryMax=512M\n"
                                     "MemoryHigh=400M\n"
                                     "PidsMax=256\n"
                                     "LimitNOFILE=1024:8192\n"
                                     "PrivateTmpSize=64M\n"
                                     "CPUQuota=200%\n"
                                     "CPUWeight=500\n"
                                     "SystemCallFilter=~ptrace\n";

static void host_every_key(void **state)
{
    (void)state;
    write_file("web1.conf", good_host);
    cfg_host h;
    cfg_errors errors = {0};
    assert_int_equal(cfg_load_host_file(tmp_dir, "web1.conf", &h, &errors), 0);
    cfg_errors_print(&errors, stderr);
    assert_int_equal(errors.n, 0);
    assert_string_equal(h.name, "web1");
    assert_int_equal(act_strv_length(h.exec_argv), 5);
    assert_string_equal(h.exec_argv[0], "bin/server");
    assert_string_equal(h.exec_argv[4], "web one");
    assert_int_equal(act_strv_length(h.environment), 2);
    assert_string_equal(h.environment[0], "MODE=staging"); /* a later KEY wins */
    assert_string_equal(h.environment[1], "GREETING=hello world");
    assert_string_equal(h.user, "web1");
    assert_string_equal(h.group, "web1");
    assert_int_equal(h.ready.kind, PROBE_CONNECT);
    assert_int_equal(h.ready.address.addr.sa.sa_family, AF_INET);
    assert_int_equal(h.ready_timeout_usec, 20 * CFG_USEC_PER_SEC);
    assert_non_null(h.health_check);
    assert_int_equal(h.health_check->kind, PROBE_EXEC);
    assert_string_equal(h.health_check->argv[1], "--fast");
    assert_int_equal(h.health_check_interval_usec, 15 * CFG_USEC_PER_SEC);
    assert_int_equal(h.health_check_failures, 5);
    assert_int_equal(h.watchdog_usec, 20 * CFG_USEC_PER_SEC);
    assert_int_equal(h.stop_timeout_usec, 5 * CFG_USEC_PER_SEC);
    assert_int_equal(h.idle_timeout_usec, 0);
    assert_int_equal(h.max_starts, 3);
    assert_string_equal(h.exec_restore[0], "/usr/lib/web1/restore");
    assert_string_equal(h.exec_restore[2], "s3");
    assert_string_equal(h.exec_replicate[0], "/usr/lib/web1/replicate");
    assert_true(h.start_rate_limit == 2.5);
    assert_int_equal(h.n_listen, 4);
    char shown[128];
    lsn_format(&h.listen[1], shown, sizeof(shown));
    assert_string_equal(shown, "[::1]:8080");
    assert_false(h.listen[1].dual_stack);
    lsn_format(&h.listen[2], shown, sizeof(shown));
    assert_string_equal(shown, "/run/web1.sock");
    /* A bare port, as systemd: every address, IPv6 and IPv4 on one socket. */
    lsn_format(&h.listen[3], shown, sizeof(shown));
    bool ipv6 = access("/proc/net/if_inet6", F_OK) == 0;
    assert_string_equal(shown, ipv6 ? "[::]:8081" : "0.0.0.0:8081");
    assert_int_equal(h.listen[3].dual_stack, ipv6);
    assert_int_equal(h.backlog, 512);
    assert_int_equal(h.limits.memory_max, 512ULL << 20);
    assert_int_equal(h.limits.memory_high, 400ULL << 20);
    assert_int_equal(h.limits.pids_max, 256);
    assert_int_equal(h.limits.nofile_soft, 1024);
    assert_int_equal(h.limits.nofile_hard, 8192);
    assert_int_equal(h.limits.private_tmp_size, 64 * 1024 * 1024);
    assert_false(h.private_ipc);
    assert_true(h.private_network);
    assert_false(h.limits.memory_max_is_default);
    assert_int_equal(h.limits.cpu_quota_percent, 200);
    assert_int_equal(h.limits.cpu_weight, 500);
    assert_int_equal(h.limits.syscall_filter.base, CFG_SYSCALLS_DEFAULT);
    assert_string_equal(h.limits.syscall_filter.deny[0], "ptrace");
    cfg_host_free(&h);
}

/* MemoryMax= left out: a quarter of the box, unless MemoryHigh= throttles
 * above that, which the default would cut off before it ever throttled. */
static void host_default_memory_max_yields_to_memory_high(void **state)
{
    (void)state;
    uint64_t share = cfg_memory_max_default();
    assert_true(share > 0);
    char text[256];
    const struct {
        uint64_t high;
        uint64_t expected;
    } cases[] = {{share / 2, share}, {share + (1 << 20), 0}, {share, 0}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(text, sizeof(text), "[Host]\nExec=bin/app\n[Limits]\nMemoryHigh=%llu\n",
                 (unsigned long long)cases[i].high);
        write_file("high.conf", text);
        cfg_host h;
        cfg_errors errors = {0};
        assert_int_equal(cfg_load_host_file(tmp_dir, "high.conf", &h, &errors), 0);
        assert_true(h.limits.memory_max_is_default);
        assert_int_equal(h.limits.memory_max, cases[i].expected);
        cfg_host_free(&h);
        cfg_errors_free(&errors);
    }
}

static void host_defaults(void **state)
{
    (void)state;
    write_file("tiny.conf", "[Host]\nExec=bin/app\n");
    cfg_host h;
    cfg_errors errors = {0};
    assert_int_equal(cfg_load_host_file(tmp_dir, "tiny.conf", &h, &errors), 0);
    assert_string_equal(h.name, "tiny");
    assert_int_equal(h.limits.nofile_soft, CFG_NOFILE_DEFAULT);
    assert_int_equal(h.limits.nofile_hard, CFG_NOFILE_DEFAULT);
    assert_int_equal(h.limits.private_tmp_size, CFG_PRIVATE_TMP_SIZE_DEFAULT);
    assert_true(h.private_ipc);
    assert_false(h.private_network);
    assert_true(h.limits.memory_max_is_default);
    assert_true(h.limits.memory_max > 0);
    assert_int_equal(h.limits.memory_max, cfg_memory_max_default());
    assert_null(h.environment);
    assert_null(h.user);
    assert_int_equal(h.ready.kind, PROBE_NOTIFY);
    assert_null(h.health_check);
    assert_int_equal(h.health_check_interval_usec, 0);
    assert_int_equal(h.health_check_failures, 3);
    assert_int_equal(h.watchdog_usec, 0);
    assert_int_equal(h.ready_timeout_usec, 30 * CFG_USEC_PER_SEC);
    assert_int_equal(h.stop_timeout_usec, 10 * CFG_USEC_PER_SEC);
    assert_int_equal(h.idle_timeout_usec, 300 * CFG_USEC_PER_SEC);
    assert_int_equal(h.max_starts, 5);
    assert_true(h.start_rate_limit == 0);
    assert_int_equal(h.n_listen, 0);
    assert_int_equal(h.backlog, SOMAXCONN);
    assert_int_equal(h.limits.memory_max, cfg_memory_max_default());
    assert_int_equal(h.limits.syscall_filter.base, CFG_SYSCALLS_DEFAULT);
    cfg_host_free(&h);

    write_file("inf.conf", "[Host]\nExec=bin/app\n[Limits]\nMemoryMax=infinity\n"
                           "PidsMax=infinity\nSystemCallFilter=\n");
    assert_int_equal(cfg_load_host_file(tmp_dir, "inf.conf", &h, &errors), 0);
    assert_true(h.limits.memory_max == CFG_LIMIT_INFINITY);
    assert_true(h.limits.pids_max == CFG_LIMIT_INFINITY);
    assert_int_equal(h.limits.syscall_filter.base, CFG_SYSCALLS_NONE);
    cfg_host_free(&h);
    assert_int_equal(errors.n, 0);
}

/* The keys that mirror systemd's take systemd's forms of their values. */
static void host_systemd_forms(void **state)
{
    (void)state;
    write_file("sd.conf", "[Host]\n"
                          "Exec=bin/app \"--greeting=hello\\tworld\" 'it\\'s'\n"
                          "Environment=\"MOTD=line1\\nline2\" PATH_X=\\x41\n"
                          "User=4000000000\n"
                          "Group=0\n"
                          "StopTimeoutSec=1min 30s\n"
                          "IdleTimeoutSec=infinity\n"
                          "ReadyTimeoutSec=1.5s\n"
                          "WatchdogSec=1min 30s\n"
                          "HealthCheck=tcp:127.0.0.1:8082\n"
                          "HealthCheckIntervalSec=500ms\n"
                          "[Listen]\n"
                          "ListenStream=8082\n"
                          "[Limits]\n"
                          "MemoryMax=50%\n"
                          "MemoryHigh=25%\n"
                          "PidsMax=infinity\n");
    cfg_host h;
    cfg_errors errors = {0};
    assert_int_equal(cfg_load_host_file(tmp_dir, "sd.conf", &h, &errors), 0);
    cfg_errors_print(&errors, stderr);
    assert_int_equal(errors.n, 0);
    assert_string_equal(h.exec_argv[1], "--greeting=hello\tworld");
    assert_string_equal(h.exec_argv[2], "it's");
    assert_string_equal(h.environment[0], "MOTD=line1\nline2");
    assert_string_equal(h.environment[1], "PATH_X=A");
    assert_string_equal(h.user, "4000000000");
    assert_string_equal(h.group, "0");
    assert_int_equal(h.stop_timeout_usec, 90 * CFG_USEC_PER_SEC);
    assert_int_equal(h.idle_timeout_usec, 0); /* never park, like 0 */
    assert_int_equal(h.ready_timeout_usec, 1500000);
    assert_int_equal(h.watchdog_usec, 90 * CFG_USEC_PER_SEC);
    assert_int_equal(h.health_check_interval_usec, 500000);
    assert_int_equal(h.n_listen, 1);
    uint64_t memory = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    assert_int_equal(h.limits.memory_max, memory / 2);
    assert_int_equal(h.limits.memory_high, memory / 4);
    assert_true(h.limits.pids_max == CFG_LIMIT_INFINITY);
    cfg_host_free(&h);
}

static void host_each_bad_key(void **state)
{
    (void)state;
    /* Line 1 [Host], line 2 Exec=bin/app, line 3 [SECTION], line 4 the bad key. */
    static const struct {
        const char *section, *key, *value;
    } bad[] = {
        {"Host", "Environment", "MODE"},
        {"Host", "Environment", "LISTEN_FDS=3"},
        {"Host", "Environment", "'unclosed=1"},
        {"Host", "User", "no such user!"},
        {"Host", "Group", "9999999999"},
        {"Host", "Ready", "http://x"},
        {"Host", "Ready", "tcp:localhost:80"},
        {"Host", "Ready", "unix:relative.sock"},
        {"Host", "Ready", "exec:relative/check"},
        {"Host", "ReadyTimeoutSec", "31"},
        {"Host", "ReadyTimeoutSec", "0"},
        {"Host", "HealthCheck", "notify"},
        {"Host", "HealthCheck", "tcp:127.0.0.1:0"},
        {"Host", "StopTimeoutSec", "soon"},
        {"Host", "StopTimeoutSec", "infinity"},
        {"Host", "ReadyTimeoutSec", "infinity"},
        {"Host", "Environment", "A=\\d"},
        {"Limits", "MemoryMax", "101%"},
        {"Host", "IdleTimeoutSec", "-1"},
        {"Host", "WatchdogSec", "50ms"},
        {"Host", "WatchdogSec", "2y"},
        {"Host", "WatchdogSec", "often"},
        {"Host", "HealthCheckIntervalSec", "10ms"},
        {"Host", "HealthCheckIntervalSec", "-5s"},
        {"Host", "HealthCheckFailures", "0"},
        {"Host", "HealthCheckFailures", "101"},
        {"Host", "MaxStarts", "0"},
        {"Host", "MaxStarts", "6"},
        {"Host", "ExecRestore", "restore.sh"},
        {"Host", "ExecReplicate", "/usr/lib/../x"},
        {"Host", "StartRateLimit", "0"},
        {"Host", "StartRateLimit", "fast"},
        {"Listen", "ListenStream", "0"},
        {"Listen", "ListenStream", "65536"},
        {"Listen", "ListenStream", "localhost:8080"},
        {"Listen", "ListenStream", "127.0.0.1:70000"},
        {"Listen", "ListenStream", "run/x.sock"},
        {"Listen", "Backlog", "0"},
        {"Limits", "MemoryMax", "512Q"},
        {"Limits", "MemoryHigh", "-1"},
        {"Limits", "PidsMax", "0"},
        {"Limits", "LimitNOFILE", "0"},
        {"Limits", "LimitNOFILE", "8192:1024"},
        {"Limits", "LimitNOFILE", "2000000"},
        {"Limits", "LimitNOFILE", "many"},
        {"Limits", "LimitNOFILE", ":64"},
        {"Limits", "PrivateTmpSize", "512K"},
        {"Limits", "PrivateTmpSize", "lots"},
        {"Host", "PrivateIPC", "sometimes"},
        {"Host", "PrivateNetwork", "lo"},
        {"Limits", "CPUQuota", "200"},
        {"Limits", "CPUWeight", "10001"},
        {"Limits", "CPUWeight", "0"},
        {"Limits", "SystemCallFilter", "strict"},
        {"Limits", "SystemCallFilter", "~notasyscall"},
        {"Limits", "SystemCallFilter", "default ~ptrace"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        char content[512];
        snprintf(content, sizeof(content), "[Host]\nExec=bin/app\n[%s]\n%s=%s\n", bad[i].section,
                 bad[i].key, bad[i].value);
        write_file("bad.conf", content);
        cfg_host h;
        cfg_errors errors = {0};
        assert_true(cfg_load_host_file(tmp_dir, "bad.conf", &h, &errors) < 0);
        if (errors.n != 1) {
            cfg_errors_print(&errors, stderr);
            fail_msg("%s=%s gave %zu errors, expected 1", bad[i].key, bad[i].value, errors.n);
        }
        char file[600];
        snprintf(file, sizeof(file), "%s/bad.conf", tmp_dir);
        assert_int_equal(errors.items[0].line, 4);
        assert_string_equal(errors.items[0].key, bad[i].key);
        char prefix[700];
        snprintf(prefix, sizeof(prefix), "%s:4: %s: ", file, bad[i].key);
        assert_true(strncmp(errors.items[0].text, prefix, strlen(prefix)) == 0);
        assert_null(h.name);
        cfg_errors_free(&errors);
    }
}

static void host_all_errors_and_cross_keys(void **state)
{
    (void)state;
    write_file("many.conf", "[Host]\n"                      /* 1 */
                            "Exec=/usr/bin/server\n"        /* 2: absolute */
                            "Group=web\n"                   /* 3: without User (reported last) */
                            "ReadyTimeoutSec=45\n"          /* 4 */
                            "[Listen]\n"                    /* 5 */
                            "ListenStream=127.0.0.1:8080\n" /* 6 */
                            "ListenStream=127.0.0.1:8080\n" /* 7: repeat */
                            "Exec=bin/x\n"                  /* 8: wrong section */
                            "[Limits]\n"                    /* 9 */
                            "MemoryMax=100M\n"              /* 10 */
                            "MemoryHigh=200M\n");           /* 11: above max (last) */
    cfg_host h;
    cfg_errors errors = {0};
    assert_int_equal(cfg_load_host_file(tmp_dir, "many.conf", &h, &errors), -EINVAL);
    cfg_errors_print(&errors, stderr);
    char file[600];
    snprintf(file, sizeof(file), "%s/many.conf", tmp_dir);
    assert_int_equal(errors.n, 6);
    assert_error_at(&errors, 0, file, 2, "Exec");
    assert_error_at(&errors, 1, file, 4, "ReadyTimeoutSec");
    assert_error_at(&errors, 2, file, 7, "ListenStream");
    assert_error_at(&errors, 3, file, 8, "Exec");
    assert_non_null(strstr(errors.items[3].text, "belongs in [Host], not in [Listen]"));
    /* Exec= was set, only to a refused value: that is not reported again as
     * missing. Then the cross-key rules. */
    assert_error_at(&errors, 4, file, 3, "Group");
    assert_error_at(&errors, 5, file, 11, "MemoryHigh");
    cfg_errors_free(&errors);

    write_file("high.conf", "[Host]\nExec=bin/x\n[Limits]\nMemoryMax=100M\nMemoryHigh=200M\n");
    assert_int_equal(cfg_load_host_file(tmp_dir, "high.conf", &h, &errors), -EINVAL);
    assert_int_equal(errors.n, 1);
    snprintf(file, sizeof(file), "%s/high.conf", tmp_dir);
    assert_error_at(&errors, 0, file, 5, "MemoryHigh");
    cfg_errors_free(&errors);

    /* A repeated check needs a check, and a count of failures needs checks
     * that repeat. */
    write_file("health.conf", "[Host]\nExec=bin/x\nHealthCheckIntervalSec=1s\n");
    assert_int_equal(cfg_load_host_file(tmp_dir, "health.conf", &h, &errors), -EINVAL);
    assert_int_equal(errors.n, 1);
    snprintf(file, sizeof(file), "%s/health.conf", tmp_dir);
    assert_error_at(&errors, 0, file, 3, "HealthCheckIntervalSec");
    assert_non_null(strstr(errors.items[0].text, "without HealthCheck="));
    cfg_errors_free(&errors);
    write_file("health.conf",
               "[Host]\nExec=bin/x\nHealthCheck=tcp:127.0.0.1:80\nHealthCheckFailures=2\n");
    assert_int_equal(cfg_load_host_file(tmp_dir, "health.conf", &h, &errors), -EINVAL);
    assert_int_equal(errors.n, 1);
    assert_error_at(&errors, 0, file, 4, "HealthCheckFailures");
    assert_non_null(strstr(errors.items[0].text, "without HealthCheckIntervalSec="));
    cfg_errors_free(&errors);
}

/* A key refused for its value is reported once, on its line: not again as
 * "not set", nor by a rule that spans it and another key. */
static void refused_values_are_reported_once(void **state)
{
    (void)state;
    static const char *const host_files[] = {
        "[Host]\nExec=/usr/bin/server\n",
        "[Host]\nExec=\n",
        "[Host]\nExec=bin/x\nUser=bad user\nGroup=web\n",
        "[Host]\nExec=bin/x 'unclosed\n",
        "[Host]\nExec=bin/x\nHealthCheck=notify\nHealthCheckIntervalSec=1s\n",
        ("[Host]\nExec=bin/x\nHealthCheck=tcp:127.0.0.1:80\nHealthCheckIntervalSec=5ms\n"
         "HealthCheckFailures=2\n"),
    };
    for (size_t i = 0; i < ARRAY_SIZE(host_files); i++) {
        write_file("once.conf", host_files[i]);
        cfg_host h;
        cfg_errors errors = {0};
        assert_int_equal(cfg_load_host_file(tmp_dir, "once.conf", &h, &errors), -EINVAL);
        if (errors.n != 1) {
            cfg_errors_print(&errors, stderr);
            fail_msg("%zu errors for:\n%s", errors.n, host_files[i]);
        }
        assert_true(errors.items[0].line > 0);
        cfg_errors_free(&errors);
    }

    write_file("ca.pem", "x\n");
    char ca[512];
    snprintf(ca, sizeof(ca), "%s", path_of("ca.pem"));
    char daemon_files[3][1024];
    snprintf(daemon_files[0], sizeof(daemon_files[0]), "[Activator]\nBox=../b\n");
    snprintf(daemon_files[1], sizeof(daemon_files[1]),
             "[Activator]\nBox=b\nStore=s3://bucket\nStoreCA=%s\n", ca);
    snprintf(daemon_files[2], sizeof(daemon_files[2]),
             "[Activator]\nBox=b\nControlListen=tcp://0.0.0.0:7443\nTLSCertificate=/c.pem\n"
             "TLSKey=/k.pem\nTLSClientCA=/ca.pem\n");
    for (size_t i = 0; i < ARRAY_SIZE(daemon_files); i++) {
        write_file("once.conf", daemon_files[i]);
        cfg_daemon c;
        cfg_errors errors = {0};
        assert_int_equal(cfg_load_daemon(path_of("once.conf"), &c, &errors), -EINVAL);
        if (errors.n != 1) {
            cfg_errors_print(&errors, stderr);
            fail_msg("%zu errors for:\n%s", errors.n, daemon_files[i]);
        }
        assert_true(errors.items[0].line > 0);
        cfg_errors_free(&errors);
    }
}

static void host_file_names_refused(void **state)
{
    (void)state;
    write_file(".hidden.conf", "[Host]\nExec=bin/x\n");
    const char *bad[] = {"../x.conf", ".hidden.conf", "a/b.conf",   "web1.txt",
                         ".conf",     "web 1.conf",   "/etc/passwd"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        cfg_host h;
        cfg_errors errors = {0};
        assert_int_equal(cfg_load_host_file(tmp_dir, bad[i], &h, &errors), -EINVAL);
        assert_int_equal(errors.n, 1);
        assert_null(h.name);
        cfg_errors_free(&errors);
    }
}

static void hosts_directory_skips_bad_files(void **state)
{
    (void)state;
    char dir[600];
    snprintf(dir, sizeof(dir), "%s/hosts", tmp_dir);
    assert_int_equal(mkdir(dir, 0755), 0);
    write_file("hosts/web1.conf", "[Host]\nExec=bin/a\n[Listen]\nListenStream=127.0.0.1:8001\n");
    write_file("hosts/web2.conf", "[Host]\nExec=bin/b\nMaxStarts=9\nUser=bad user\n");
    write_file("hosts/web3.conf", "[Host]\nExec=bin/c\n[Listen]\nListenStream=127.0.0.1:8003\n");
    /* web4 wants web1's address: the later file in name order is refused. */
    write_file("hosts/web4.conf", "[Host]\nExec=bin/d\n[Listen]\nListenStream=127.0.0.1:8001\n");
    write_file("hosts/.hidden.conf", "[Host]\nExec=bin/e\n");
    write_file("hosts/README", "not a host file, ignored\n");
    write_file("hosts/web5.conf.bak", "[Host]\nExec=bin/f\n");
    snprintf(dir + strlen(dir), sizeof(dir) - strlen(dir), "/sub.conf");
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(dir, sizeof(dir), "%s/hosts", tmp_dir);

    cfg_host *hosts = NULL;
    size_t n = 0;
    cfg_errors errors = {0};
    assert_int_equal(cfg_load_hosts(dir, &hosts, &n, &errors), 0);
    cfg_errors_print(&errors, stderr);
    assert_int_equal(n, 2);
    assert_string_equal(hosts[0].name, "web1");
    assert_string_equal(hosts[1].name, "web3");
    char file[700];
    snprintf(file, sizeof(file), "%s/.hidden.conf", dir);
    assert_int_equal(cfg_errors_count_file(&errors, file), 1);
    assert_non_null(strstr(errors.items[0].text, "starts with '.'"));
    snprintf(file, sizeof(file), "%s/web2.conf", dir);
    assert_int_equal(cfg_errors_count_file(&errors, file), 2); /* both problems */
    snprintf(file, sizeof(file), "%s/sub.conf", dir);
    assert_int_equal(cfg_errors_count_file(&errors, file), 1);
    snprintf(file, sizeof(file), "%s/web4.conf", dir);
    assert_int_equal(cfg_errors_count_file(&errors, file), 1);
    /* The refused address is reported on its own line. */
    bool on_its_line = false;
    for (size_t i = 0; i < errors.n; i++)
        on_its_line |= strcmp(errors.items[i].file, file) == 0 && errors.items[i].line == 4 &&
                       strcmp(errors.items[i].key, "ListenStream") == 0;
    assert_true(on_its_line);
    assert_int_equal(errors.n, 5);
    cfg_hosts_free(hosts, n);
    cfg_errors_free(&errors);

    /* A missing directory is an error of its own, with nothing loaded. */
    assert_true(cfg_load_hosts("/nonexistent/hosts", &hosts, &n, &errors) == -ENOENT);
    assert_int_equal(n, 0);
    assert_int_equal(errors.n, 1);
    cfg_errors_free(&errors);
}

static void files_that_are_not_text(void **state)
{
    (void)state;
    write_file("nul.conf", "[Host]\nExec=bin/x\n");
    int fd = open(path_of("nul.conf"), O_WRONLY | O_APPEND | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "User=a\0b\n", 9), 9);
    close(fd);
    cfg_host h;
    cfg_errors errors = {0};
    assert_int_equal(cfg_load_host_file(tmp_dir, "nul.conf", &h, &errors), -EINVAL);
    assert_int_equal(errors.n, 1);
    assert_int_equal(errors.items[0].line, 3);
    cfg_errors_free(&errors);

    /* A UTF-8 byte order mark and CRLF line ends are fine. */
    write_file("bom.conf", "\xEF\xBB\xBF[Host]\r\nExec=bin/x\r\n");
    assert_int_equal(cfg_load_host_file(tmp_dir, "bom.conf", &h, &errors), 0);
    assert_string_equal(h.exec_argv[0], "bin/x");
    cfg_host_free(&h);
    assert_int_equal(errors.n, 0);
}

static void write_bytes(const char *name, const void *bytes, size_t len)
{
    int fd = open(path_of(name), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, bytes, len), (ssize_t)len);
    close(fd);
}

/* A binary file (or a file name) in the hosts directory: every error still
 * prints as plain lines, its bytes escaped, never raw to the terminal. */
static void binary_input_is_escaped_in_errors(void **state)
{
    (void)state;
    assert_int_equal(mkdir(path_of("hosts"), 0755), 0);
    static const char binary[] = "[Ho\x1bst]\n"
                                 "Exec=bin/x\n"
                                 "[Host]\n"
                                 "Ex\x07"
                                 "ec=bin/x\n"
                                 "Exec=\x1b[31m/red\x7f\xff\n"
                                 "User=\x01\x02\n"
                                 "Ready=tcp:\x9b"
                                 "1.2.3.4:80\n"
                                 "\x80\x81=\x90"
                                 "\n"
                                 "Environment=A=\\\x01\n"
                                 "[Listen]\n"
                                 "ListenStream=\x1b]0;title\x07\n"
                                 "\x00\x01\x02\x03\n"
                                 "\xde\xad\xbe\xef"
                                 "\r\n";
    write_bytes("hosts/bin.conf", binary, sizeof(binary) - 1);
    write_file("hosts/es\x1b"
               "c.conf",
               "[Host]\nExec=bin/x\n");
    unsigned char noise[4096];
    for (size_t i = 0; i < sizeof(noise); i++)
        noise[i] = (unsigned char)(i * 131 + 7);
    write_bytes("hosts/noise.conf", noise, sizeof(noise));

    cfg_host *hosts = NULL;
    size_t n = 0;
    cfg_errors errors = {0};
    assert_int_equal(cfg_load_hosts(path_of("hosts"), &hosts, &n, &errors), 0);
    assert_int_equal(n, 0);
    assert_true(errors.n >= 8);
    char *printed = NULL;
    size_t printed_len = 0;
    FILE *out = open_memstream(&printed, &printed_len);
    assert_non_null(out);
    assert_int_equal(cfg_errors_print(&errors, out), errors.n);
    assert_int_equal(fclose(out), 0);
    for (size_t i = 0; i < printed_len; i++) {
        unsigned char c = (unsigned char)printed[i];
        if (c != '\n' && (c < 0x20 || c >= 0x7f))
            fail_msg("byte 0x%02x at %zu of:\n%s", c, i, printed);
    }
    /* Escaped, not dropped: the reader sees which bytes were there. */
    assert_non_null(strstr(printed, "\\x1b"));
    assert_non_null(strstr(printed, "Ex\\x07ec"));
    assert_non_null(strstr(printed, "es\\x1bc.conf"));
    for (size_t i = 0; i < errors.n; i++)
        assert_null(errors.items[i].key ? strchr(errors.items[i].key, '\x07') : NULL);
    free(printed);
    cfg_hosts_free(hosts, n);
    cfg_errors_free(&errors);
}

/* ---- what a reload reads beyond the parse ---- */

/* Loads tmp_dir/<name>.conf after writing text there. */
static void load_host(const char *name, const char *text, cfg_host *out)
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
    load_host("web1",
              "[Host]\n"                      /* 1 */
              "Exec=bin/server\n"             /* 2 */
              "User=nobody\n"                 /* 3 */
              "Group=nogroup\n"               /* 4 */
              "[Listen]\n"                    /* 5 */
              "ListenStream=127.0.0.1:8001\n" /* 6 */
              "# a comment\n"                 /* 7 */
              "ListenStream=/run/web1.sock\n" /* 8 */
              "[Limits]\n"                    /* 9 */
              "PidsMax=64\n"                  /* 10 */
              "MemoryMax=64M\n"               /* 11 */
              "SystemCallFilter=~ptrace\n",   /* 12 */
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
    load_host("web2",
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
    cfg_daemon config;
    cfg_errors errors = {0};
    assert_int_equal(cfg_load_daemon(path_of("activatord.conf"), &config, &errors), 0);
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
    /* Capabilities in a root host's own user namespace reach nothing. */
    write_file("hosts/rootcaps.conf",
               "[Host]\nExec=bin/a\nUser=root\nAmbientCapabilities=CAP_NET_BIND_SERVICE\n");
    write_file("activatord.conf", "[Activator]\nBox=box-1\nControlGroup=nosuchgroup_act\n");
    char config_path[512];
    snprintf(config_path, sizeof(config_path), "%s", path_of("activatord.conf"));
    cfg_daemon config;
    cfg_errors errors = {0};
    assert_int_equal(cfg_load_daemon(config_path, &config, &errors), 0);
    free(config.hosts_directory);
    config.hosts_directory = strdup(hosts_dir);
    cfg_host *hosts = NULL;
    size_t n = 0;
    assert_int_equal(cfg_load_hosts(hosts_dir, &hosts, &n, &errors), 0);
    assert_int_equal(n, 4);
    assert_int_equal(cfg_check_accounts(config_path, &config, hosts, n, &errors), 4);
    assert_int_equal(errors.n, 4);
    char expected[4][700];
    snprintf(expected[0], sizeof(expected[0]),
             "%s/bad.conf:4: User: nosuchuser_act: no such user on this box", hosts_dir);
    snprintf(expected[1], sizeof(expected[1]),
             "%s/badgroup.conf:4: Group: nosuchgroup_act: no such group on this box", hosts_dir);
    snprintf(expected[2], sizeof(expected[2]),
             "%s/rootcaps.conf:4: AmbientCapabilities: set with User=root: a root host runs as "
             "root in a user namespace of its own",
             hosts_dir);
    snprintf(expected[3], sizeof(expected[3]),
             "%s:3: ControlGroup: nosuchgroup_act: no such group on this box", config_path);
    for (size_t i = 0; i < 4; i++)
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
    load_host("running", base, &running);
    load_host("loaded", text, &loaded);
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
    assert_int_equal(changes_after("MemoryMax=64M\n", "MemoryMax=128M\n"), CFG_HOST_CHANGED_LIMITS);
    assert_int_equal(changes_after(NULL, "PidsMax=10\n"), CFG_HOST_CHANGED_LIMITS);
    /* The filter and the rlimits are in [Limits] but are set at the exec. */
    assert_int_equal(changes_after(NULL, "LimitNOFILE=4096\n"), CFG_HOST_CHANGED_START);
    assert_int_equal(changes_after(NULL, "PrivateTmpSize=64M\n"), CFG_HOST_CHANGED_START);
    assert_int_equal(changes_after(NULL, "SystemCallFilter=~ptrace\n"), CFG_HOST_CHANGED_START);
    assert_int_equal(changes_after("--port 8001", "--port 8002"), CFG_HOST_CHANGED_START);
    assert_int_equal(changes_after("A=1", "A=2"), CFG_HOST_CHANGED_START);
    assert_int_equal(
        changes_after("StopTimeoutSec=3\n", "StopTimeoutSec=3\nReady=tcp:127.0.0.1:8001\n"),
        CFG_HOST_CHANGED_START);
    assert_int_equal(changes_after("StopTimeoutSec=3\n", "User=nobody\n"), CFG_HOST_CHANGED_START);
    assert_int_equal(changes_after("MemoryMax=64M\n", "MemoryMax=1G\n[Host]\nMaxStarts=2\n"
                                                      "[Listen]\nListenStream=/run/x.sock\n"),
                     CFG_HOST_CHANGED_LISTEN | CFG_HOST_CHANGED_LIMITS | CFG_HOST_CHANGED_START);
}

/* ParkMode=, FrozenMaxSec=, ThawCheck= and FreezeMemoryPressure=: their
 * defaults, their values, their bad values (one error each, naming the
 * key), and that changing them applies from the next start. */
static void freeze_keys(void **state)
{
    (void)state;
    write_file("d.conf", "[Activator]\nBox=box-1\n");
    cfg_daemon c;
    cfg_errors errors = {0};
    assert_int_equal(cfg_load_daemon(path_of("d.conf"), &c, &errors), 0);
    assert_int_equal(c.freeze_memory_pressure_usec, 200 * 1000);
    cfg_daemon_free(&c);
    write_file("d.conf", "[Activator]\nBox=box-1\nFreezeMemoryPressure=no\n");
    assert_int_equal(cfg_load_daemon(path_of("d.conf"), &c, &errors), 0);
    assert_int_equal(c.freeze_memory_pressure_usec, 0);
    cfg_daemon_free(&c);
    write_file("d.conf", "[Activator]\nBox=box-1\nFreezeMemoryPressure=1ms\n");
    assert_int_equal(cfg_load_daemon(path_of("d.conf"), &c, &errors), 0);
    assert_int_equal(c.freeze_memory_pressure_usec, 1000);
    cfg_daemon_free(&c);
    write_file("bad.conf", "[Activator]\nBox=box-1\nFreezeMemoryPressure=2s\n");
    expect_one_error("bad.conf", 3, "FreezeMemoryPressure", "");
    write_file("bad.conf", "[Activator]\nBox=box-1\nFreezeMemoryPressure=0\n");
    expect_one_error("bad.conf", 3, "FreezeMemoryPressure", "");

    cfg_host h;
    load_host("plain", "[Host]\nExec=bin/app\n", &h);
    assert_false(h.park_freeze);
    assert_false(h.thaw_check_cached);
    assert_int_equal(h.frozen_max_usec, 3600 * CFG_USEC_PER_SEC);
    cfg_host_free(&h);
    load_host("frozen",
              "[Host]\nExec=bin/app\nParkMode=freeze\nFrozenMaxSec=10min\n"
              "ThawCheck=cached\n",
              &h);
    assert_true(h.park_freeze);
    assert_true(h.thaw_check_cached);
    assert_int_equal(h.frozen_max_usec, 600 * CFG_USEC_PER_SEC);
    cfg_host_free(&h);
    assert_int_equal(changes_after("StopTimeoutSec=3\n", "StopTimeoutSec=3\nParkMode=freeze\n"),
                     CFG_HOST_CHANGED_START);

    static const struct {
        const char *text, *key, *words;
    } bad[] = {
        {"ParkMode=hibernate\n", "ParkMode", "is not a park mode (use stop"},
        {"ThawCheck=never\n", "ThawCheck", "is not a thaw check (use claim"},
        {"FrozenMaxSec=0\n", "FrozenMaxSec", ""},
        {"FrozenMaxSec=60d\n", "FrozenMaxSec", ""},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        char text[256];
        snprintf(text, sizeof(text), "[Host]\nExec=bin/app\n%s", bad[i].text);
        write_file("bad.conf", text);
        errors = (cfg_errors){0};
        assert_int_equal(cfg_load_host_file(tmp_dir, "bad.conf", &h, &errors), -EINVAL);
        if (errors.n != 1 || !strstr(errors.items[0].text, bad[i].key) ||
            !strstr(errors.items[0].text, bad[i].words)) {
            cfg_errors_print(&errors, stderr);
            fail_msg("%s: expected one error about %s", bad[i].text, bad[i].key);
        }
        cfg_errors_free(&errors);
    }
}

/* A host file of "[Host]\nExec=bin/app\n" and lines is refused with one
 * error, on the last of lines (the key's own), naming key and saying words. */
static void expect_one_error_on_its_line(const char *lines, const char *key, const char *words)
{
    char text[256];
    snprintf(text, sizeof(text), "[Host]\nExec=bin/app\n%s", lines);
    write_file("bad.conf", text);
    cfg_host h;
    cfg_errors errors = {0};
    assert_int_equal(cfg_load_host_file(tmp_dir, "bad.conf", &h, &errors), -EINVAL);
    unsigned line = 2;
    for (const char *c = lines; *c; c++)
        line += *c == '\n';
    if (errors.n != 1 || errors.items[0].line != line || !strstr(errors.items[0].text, key) ||
        !strstr(errors.items[0].text, words)) {
        cfg_errors_print(&errors, stderr);
        fail_msg("%s: expected one error on line %u about %s saying \"%s\"", lines, line, key,
                 words);
    }
    cfg_errors_free(&errors);
}

/* WakeTimeoutSec= and RestoreRequiresSameBuild=: their defaults, their
 * values, and their bad values (one error each, on the key's line). */
static void wake_bound_and_restore_keys(void **state)
{
    (void)state;
    cfg_host h;
    load_host("plain", "[Host]\nExec=bin/app\n", &h);
    assert_int_equal(h.wake_timeout_usec, 90 * 1000 * 1000);
    assert_false(h.restore_requires_same_build);
    cfg_host_free(&h);
    load_host("set", "[Host]\nExec=bin/app\nWakeTimeoutSec=20s\nRestoreRequiresSameBuild=yes\n",
              &h);
    assert_int_equal(h.wake_timeout_usec, 20 * 1000 * 1000);
    assert_true(h.restore_requires_same_build);
    cfg_host_free(&h);
    load_host("unbounded", "[Host]\nExec=bin/app\nWakeTimeoutSec=infinity\n", &h);
    assert_int_equal(h.wake_timeout_usec, 0);
    cfg_host_free(&h);

    static const struct {
        const char *text, *key, *words;
    } bad[] = {
        {"WakeTimeoutSec=0\n", "WakeTimeoutSec", "out of range"},
        {"WakeTimeoutSec=500ms\n", "WakeTimeoutSec", "out of range"},
        {"WakeTimeoutSec=2h\n", "WakeTimeoutSec", "out of range"},
        {"WakeTimeoutSec=soon\n", "WakeTimeoutSec", "soon"},
        {"RestoreRequiresSameBuild=maybe\n", "RestoreRequiresSameBuild", "maybe"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        expect_one_error_on_its_line(bad[i].text, bad[i].key, bad[i].words);
}

/* ReplicateRestart=, ReplicateRestartSec= and ReplicateRequired=: their
 * defaults, their values, their bad values and the rules between them
 * (one error each, on the key's line, saying what to do), and that
 * changing them applies from the next start. */
static void replicate_keys(void **state)
{
    (void)state;
    cfg_host h;
    load_host("plain", "[Host]\nExec=bin/app\nExecReplicate=/usr/lib/web1/replicate\n", &h);
    assert_int_equal(h.replicate_restart, CFG_REPLICATE_RESTART_ON_FAILURE);
    assert_int_equal(h.replicate_restart_usec, CFG_REPLICATE_RESTART_USEC_DEFAULT);
    assert_false(h.replicate_required);
    cfg_host_free(&h);
    load_host("shaped",
              "[Host]\nExec=bin/app\nExecReplicate=/usr/lib/web1/replicate\n"
              "ReplicateRestart=always\nReplicateRestartSec=250ms\nReplicateRequired=yes\n",
              &h);
    assert_int_equal(h.replicate_restart, CFG_REPLICATE_RESTART_ALWAYS);
    assert_int_equal(h.replicate_restart_usec, 250 * 1000);
    assert_true(h.replicate_required);
    cfg_host_free(&h);
    load_host("never",
              "[Host]\nExec=bin/app\nExecReplicate=/usr/lib/web1/replicate\n"
              "ReplicateRestart=no\n",
              &h);
    assert_int_equal(h.replicate_restart, CFG_REPLICATE_RESTART_NO);
    cfg_host_free(&h);

    static const struct {
        const char *text, *key, *words;
    } bad[] = {
        {"ExecReplicate=/r\nReplicateRestart=on-abort\n", "ReplicateRestart",
         "is not a restart policy (use on-failure"},
        {"ExecReplicate=/r\nReplicateRestart=yes\n", "ReplicateRestart", "is not a restart policy"},
        {"ExecReplicate=/r\nReplicateRestartSec=1ms\n", "ReplicateRestartSec", "out of range"},
        {"ExecReplicate=/r\nReplicateRestartSec=1min\n", "ReplicateRestartSec", "out of range"},
        {"ExecReplicate=/r\nReplicateRequired=maybe\n", "ReplicateRequired", ""},
        {"ReplicateRestart=always\n", "ReplicateRestart", "set without ExecReplicate="},
        {"ReplicateRestartSec=2s\n", "ReplicateRestartSec", "set without ExecReplicate="},
        {"ReplicateRequired=yes\n", "ReplicateRequired", "or remove ReplicateRequired="},
        {"ExecReplicate=/r\nReplicateRestart=no\nReplicateRestartSec=2s\n", "ReplicateRestartSec",
         "set with ReplicateRestart=no"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        expect_one_error_on_its_line(bad[i].text, bad[i].key, bad[i].words);
    /* Each applies from the next start: the running replica keeps what
     * it started with. */
    static const char replicated[] = "[Host]\nExec=bin/app\nExecReplicate=/r\n";
    static const char *const changed[] = {"ReplicateRestart=no\n", "ReplicateRestartSec=2s\n",
                                          "ReplicateRequired=yes\n"};
    cfg_host running;
    load_host("running", replicated, &running);
    for (size_t i = 0; i < ARRAY_SIZE(changed); i++) {
        char text[256];
        snprintf(text, sizeof(text), "%s%s", replicated, changed[i]);
        load_host("loaded", text, &h);
        assert_int_equal(cfg_host_changes(&running, &h), CFG_HOST_CHANGED_START);
        cfg_host_free(&h);
    }
    cfg_host_free(&running);
}

/* UserDatabaseDirectory=: its default, no, and a relative path refused. */
static void user_database_directory(void **state)
{
    (void)state;
    write_file("d.conf", "[Activator]\nBox=box-1\n");
    cfg_daemon c;
    cfg_errors errors = {0};
    assert_int_equal(cfg_load_daemon(path_of("d.conf"), &c, &errors), 0);
    assert_string_equal(c.user_database_directory, "/run/systemd/userdb");
    cfg_daemon_free(&c);
    write_file("d.conf", "[Activator]\nBox=box-1\nUserDatabaseDirectory=no\n");
    assert_int_equal(cfg_load_daemon(path_of("d.conf"), &c, &errors), 0);
    assert_null(c.user_database_directory);
    cfg_daemon_free(&c);
    write_file("bad.conf", "[Activator]\nBox=box-1\nUserDatabaseDirectory=run/userdb\n");
    expect_one_error("bad.conf", 3, "UserDatabaseDirectory", "or no to publish no users");
}

/* RegistryAuthFile=, RegistryInsecure= and BuildFetchTimeoutSec=:
 * defaults, values, refusals. */
static void registry_keys(void **state)
{
    (void)state;
    write_file("d.conf", "[Activator]\nBox=box-1\n");
    cfg_daemon c;
    cfg_errors errors = {0};
    assert_int_equal(cfg_load_daemon(path_of("d.conf"), &c, &errors), 0);
    assert_string_equal(c.registry_auth_file, "/etc/activator/registry-auth.json");
    assert_null(c.registry_insecure);
    assert_int_equal(c.build_fetch_timeout_usec, 120 * CFG_USEC_PER_SEC);
    cfg_daemon_free(&c);
    write_file("d.conf", "[Activator]\nBox=box-1\nRegistryAuthFile=/etc/containers/auth.json\n"
                         "RegistryInsecure=registry.lab:5000 10.0.0.7\n"
                         "RegistryInsecure=localhost:5001\nBuildFetchTimeoutSec=10min\n");
    assert_int_equal(cfg_load_daemon(path_of("d.conf"), &c, &errors), 0);
    assert_string_equal(c.registry_auth_file, "/etc/containers/auth.json");
    assert_int_equal(act_strv_length(c.registry_insecure), 3);
    assert_string_equal(c.registry_insecure[2], "localhost:5001");
    assert_int_equal(c.build_fetch_timeout_usec, 600 * CFG_USEC_PER_SEC);
    cfg_daemon_free(&c);
    write_file("bad.conf", "[Activator]\nBox=box-1\nBuildFetchTimeoutSec=0\n");
    expect_one_error("bad.conf", 3, "BuildFetchTimeoutSec", "out of range (use 1s to 1h)");
    write_file("bad.conf", "[Activator]\nBox=box-1\nBuildFetchTimeoutSec=2h\n");
    expect_one_error("bad.conf", 3, "BuildFetchTimeoutSec", "out of range (use 1s to 1h)");
    write_file("bad.conf", "[Activator]\nBox=box-1\nRegistryAuthFile=auth.json\n");
    expect_one_error("bad.conf", 3, "RegistryAuthFile", "absolute");
    write_file("bad.conf", "[Activator]\nBox=box-1\nRegistryInsecure=https://registry.lab\n");
    expect_one_error("bad.conf", 3, "RegistryInsecure", "is not a registry");
    write_file("bad.conf", "[Activator]\nBox=box-1\nRegistryInsecure=registry.lab:99999\n");
    expect_one_error("bad.conf", 3, "RegistryInsecure", "is not a registry");
}

/* Checkpoints= and CheckpointsKeep=, State=, ExecCheckpoint=,
 * CheckpointLive=, CheckpointTimeoutSec= and CheckpointEverySec=: their
 * defaults, their values,
 * and the rules between them. */
static void checkpoint_keys(void **state)
{
    (void)state;
    write_file("d.conf", "[Activator]\nBox=box-1\n");
    cfg_daemon c;
    cfg_errors errors = {0};
    assert_int_equal(cfg_load_daemon(path_of("d.conf"), &c, &errors), 0);
    assert_null(c.checkpoints);
    assert_int_equal(c.checkpoints_keep, 3);
    cfg_daemon_free(&c);
    write_file("d.conf", "[Activator]\nBox=box-1\nCheckpoints=dir:///srv/checkpoints\n"
                         "CheckpointsKeep=7\n");
    assert_int_equal(cfg_load_daemon(path_of("d.conf"), &c, &errors), 0);
    assert_string_equal(c.checkpoints, "dir:///srv/checkpoints");
    assert_int_equal(c.checkpoints_keep, 7);
    cfg_daemon_free(&c);
    write_file("bad.conf", "[Activator]\nBox=box-1\nCheckpoints=/srv/checkpoints\n");
    expect_one_error("bad.conf", 3, "Checkpoints", "dir:///PATH");
    write_file("bad.conf", "[Activator]\nBox=box-1\nCheckpointsKeep=0\n");
    expect_one_error("bad.conf", 3, "CheckpointsKeep", "");

    cfg_host h;
    load_host("plain", "[Host]\nExec=bin/app\n", &h);
    assert_false(h.stateless);
    assert_null(h.exec_checkpoint);
    assert_false(h.checkpoint_live);
    assert_int_equal(h.checkpoint_timeout_usec, 300 * CFG_USEC_PER_SEC);
    assert_int_equal(h.checkpoint_every_usec, 0);
    cfg_host_free(&h);
    load_host("every", "[Host]\nExec=bin/app\nCheckpointEverySec=30s\n", &h);
    assert_int_equal(h.checkpoint_every_usec, 30 * CFG_USEC_PER_SEC);
    cfg_host_free(&h);
    load_host("never", "[Host]\nExec=bin/app\nCheckpointEverySec=0\n", &h);
    assert_int_equal(h.checkpoint_every_usec, 0);
    cfg_host_free(&h);
    load_host("failover",
              "[Host]\nExec=bin/app\nFailover=yes\nFailoverBoxes=box-2 box-3\n"
              "FailoverBoxes=box-3 box-4\n",
              &h);
    assert_true(h.failover);
    assert_int_equal(act_strv_length(h.failover_boxes), 3);
    assert_string_equal(h.failover_boxes[2], "box-4");
    cfg_host_free(&h);
    load_host("hooks",
              "[Host]\nExec=bin/app\nState=dir\nExecCheckpoint=/usr/lib/snap --live\n"
              "ExecRestore=/usr/lib/fetch\nCheckpointLive=yes\nCheckpointTimeoutSec=2min\n",
              &h);
    assert_string_equal(h.exec_checkpoint[0], "/usr/lib/snap");
    assert_string_equal(h.exec_checkpoint[1], "--live");
    assert_true(h.checkpoint_live);
    assert_int_equal(h.checkpoint_timeout_usec, 120 * CFG_USEC_PER_SEC);
    cfg_host_free(&h);
    load_host("stateless", "[Host]\nExec=bin/app\nState=none\n", &h);
    assert_true(h.stateless);
    cfg_host_free(&h);

    static const struct {
        const char *text;
        const char *key;
        const char *words;
    } bad[] = {
        {"State=tmpfs\n", "State", "is not dir or none"},
        {"ExecCheckpoint=snap\nExecRestore=/usr/lib/fetch\n", "ExecCheckpoint", "absolute"},
        {"ExecCheckpoint=/usr/lib/snap\n", "ExecCheckpoint", "without ExecRestore="},
        {"CheckpointLive=yes\n", "CheckpointLive", "without ExecCheckpoint="},
        {"State=none\nExecRestore=/usr/lib/fetch\n", "ExecRestore", "State=none"},
        {"CheckpointTimeoutSec=0\n", "CheckpointTimeoutSec", ""},
        {"CheckpointEverySec=500ms\n", "CheckpointEverySec", "out of range"},
        {"CheckpointEverySec=2d\n", "CheckpointEverySec", "out of range"},
        {"CheckpointEverySec=often\n", "CheckpointEverySec", "often"},
        {"State=none\nCheckpointEverySec=30s\n", "CheckpointEverySec", "State=none"},
        {"FailoverBoxes=box-2\n", "FailoverBoxes", "without Failover=yes"},
        {"Failover=yes\nFailoverBoxes=box-2 ../box-3\n", "FailoverBoxes", "../box-3"},
        {"Failover=perhaps\n", "Failover", "perhaps"},
        {"Failover=yes\nFailoverBoxes=b0 b1 b2 b3 b4 b5 b6 b7 b8 b9 b10 b11 b12 b13 b14 b15 "
         "b16\n",
         "FailoverBoxes", "more than 16"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        char text[256];
        snprintf(text, sizeof(text), "[Host]\nExec=bin/app\n%s", bad[i].text);
        write_file("bad.conf", text);
        errors = (cfg_errors){0};
        assert_int_equal(cfg_load_host_file(tmp_dir, "bad.conf", &h, &errors), -EINVAL);
        if (errors.n != 1 || !strstr(errors.items[0].text, bad[i].key) ||
            !strstr(errors.items[0].text, bad[i].words)) {
            cfg_errors_print(&errors, stderr);
            fail_msg("%s: expected one error on %s saying \"%s\"", bad[i].text, bad[i].key,
                     bad[i].words);
        }
        cfg_errors_free(&errors);
    }
    /* How a host's state is carried applies from its next start. */
    assert_int_equal(changes_after(NULL, "[Host]\nState=none\n"), CFG_HOST_CHANGED_START);
}

/* ReadWritePaths= in systemd's syntax: lines add up, an empty one clears,
 * a repeat counts once, "-" is kept; bad words refuse the line. */
static void read_write_paths_and_the_view(void **state)
{
    (void)state;
    write_file("rw.conf", "[Host]\nExec=bin/app\n"
                          "ReadWritePaths=/srv/old\n"
                          "ReadWritePaths=\n"
                          "ReadWritePaths=/srv/a \"/srv/with space\" -/var/cache/a\n"
                          "ReadWritePaths=/srv/a\n");
    cfg_host h;
    cfg_errors errors = {0};
    assert_int_equal(cfg_load_host_file(tmp_dir, "rw.conf", &h, &errors), 0);
    assert_int_equal(act_strv_length(h.read_write_paths), 3);
    assert_string_equal(h.read_write_paths[0], "/srv/a");
    assert_string_equal(h.read_write_paths[1], "/srv/with space");
    assert_string_equal(h.read_write_paths[2], "-/var/cache/a");
    assert_int_equal(h.lines.read_write_paths, 6);
    assert_false(h.filesystem_box);

    /* The view's paths on a daemon with its defaults and a dir store. */
    cfg_daemon daemon = {
        .state_directory = (char *)"/var/lib/activator",
        .runtime_directory = (char *)"/run/activator",
        .hosts_directory = (char *)"/etc/activator/hosts",
        .store = (char *)"dir:///srv/claims",
    };
    cfg_view_paths paths;
    act_error err = {0};
    assert_int_equal(cfg_host_view_paths(&daemon, &h, false, &paths, &err), 0);
    assert_int_equal(act_strv_length(paths.hidden), 4);
    assert_string_equal(paths.hidden[3], "/srv/claims");
    assert_string_equal(paths.writable[0], "/var/lib/activator/hosts/rw/state");
    assert_string_equal(paths.writable[1], "/srv/a");
    assert_string_equal(paths.writable_if_present[0], "/var/cache/a");
    cfg_view_paths_clear(&paths);

    /* As root: /run hidden too, but for the journal's and resolved's. */
    assert_int_equal(cfg_host_view_paths(&daemon, &h, true, &paths, &err), 0);
    assert_int_equal(act_strv_length(paths.hidden), 5);
    assert_string_equal(paths.hidden[4], "/run");
    assert_int_equal(act_strv_length(paths.writable_if_present), 3);
    assert_string_equal(paths.writable_if_present[0], "/run/systemd/journal");
    assert_string_equal(paths.writable_if_present[1], "/run/systemd/resolve");
    cfg_view_paths_clear(&paths);

    /* A path inside a directory of the daemon is refused, naming both. */
    static const char *const inside[][2] = {
        {"/var/lib/activator/releases", "/var/lib/activator, the daemon's state directory"},
        {"/run/activator", "/run/activator, the daemon's runtime directory"},
        {"/etc/activator/hosts/other.conf", "/etc/activator/hosts, the hosts directory"},
        {"-/srv/claims/x", "/srv/claims, the claims directory (Store=)"},
    };
    for (size_t i = 0; i < sizeof(inside) / sizeof(inside[0]); i++) {
        char *saved = h.read_write_paths[0];
        h.read_write_paths[0] = (char *)inside[i][0];
        assert_int_equal(cfg_host_view_paths(&daemon, &h, false, &paths, &err), -EACCES);
        h.read_write_paths[0] = saved;
        if (!strstr(err.message, inside[i][1]) || !strstr(err.message, "no host sees"))
            fail_msg("%s: \"%s\" does not name \"%s\"", inside[i][0], err.message, inside[i][1]);
    }
    /* Not a prefix that merely looks alike. */
    char *saved = h.read_write_paths[0];
    h.read_write_paths[0] = (char *)"/var/lib/activator-other";
    assert_int_equal(cfg_host_view_paths(&daemon, &h, false, &paths, &err), 0);
    h.read_write_paths[0] = saved;
    cfg_view_paths_clear(&paths);
    cfg_host_free(&h);

    static const char *const bad[][2] = {
        {"ReadWritePaths=srv\n", "not an absolute path"},
        {"ReadWritePaths=/srv/../etc\n", ". or .. component"},
        {"ReadWritePaths=+/srv\n", "RootDirectory="},
        {"ReadWritePaths=/\n", "the whole box"},
        {"ReadWritePaths=/proc/sys\n", "beneath /proc"},
        {"ReadWritePaths=\"/srv\n", "ReadWritePaths"},
        {"FilesystemView=none\n", "use private"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char content[256];
        snprintf(content, sizeof(content), "[Host]\nExec=bin/app\n%s", bad[i][0]);
        write_file("bad.conf", content);
        cfg_errors bad_errors = {0};
        assert_int_equal(cfg_load_host_file(tmp_dir, "bad.conf", &h, &bad_errors), -EINVAL);
        assert_int_equal(bad_errors.n, 1);
        if (!strstr(bad_errors.items[0].text, ":3: ") ||
            !strstr(bad_errors.items[0].text, bad[i][1]))
            fail_msg("%s: \"%s\" does not say \"%s\" on line 3", bad[i][0],
                     bad_errors.items[0].text, bad[i][1]);
        cfg_errors_free(&bad_errors);
    }
    write_file("box.conf", "[Host]\nExec=bin/app\nFilesystemView=box\n");
    assert_int_equal(cfg_load_host_file(tmp_dir, "box.conf", &h, &errors), 0);
    assert_true(h.filesystem_box);
    cfg_host_free(&h);
    assert_int_equal(errors.n, 0);
    assert_int_equal(
        changes_after("StopTimeoutSec=3\n", "StopTimeoutSec=3\nReadWritePaths=/srv/b\n"),
        CFG_HOST_CHANGED_START);
    assert_int_equal(changes_after("StopTimeoutSec=3\n", "StopTimeoutSec=3\nFilesystemView=box\n"),
                     CFG_HOST_CHANGED_START);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(daemon_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(daemon_every_key, setup, teardown),
        cmocka_unit_test_setup_teardown(daemon_each_bad_key, setup, teardown),
        cmocka_unit_test_setup_teardown(daemon_all_errors_of_a_file, setup, teardown),
        cmocka_unit_test_setup_teardown(daemon_cross_key_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(daemon_control_roles, setup, teardown),
        cmocka_unit_test_setup_teardown(daemon_store_access_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(daemon_missing_file, setup, teardown),
        cmocka_unit_test_setup_teardown(host_every_key, setup, teardown),
        cmocka_unit_test_setup_teardown(host_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(host_default_memory_max_yields_to_memory_high, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(host_systemd_forms, setup, teardown),
        cmocka_unit_test_setup_teardown(host_each_bad_key, setup, teardown),
        cmocka_unit_test_setup_teardown(host_all_errors_and_cross_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(refused_values_are_reported_once, setup, teardown),
        cmocka_unit_test_setup_teardown(host_file_names_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(hosts_directory_skips_bad_files, setup, teardown),
        cmocka_unit_test_setup_teardown(files_that_are_not_text, setup, teardown),
        cmocka_unit_test_setup_teardown(binary_input_is_escaped_in_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(lines_of_box_checked_keys_are_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(the_daemon_file_keeps_its_key_lines, setup, teardown),
        cmocka_unit_test_setup_teardown(missing_accounts_are_reported_on_their_lines, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(changes_are_sorted_by_when_they_apply, setup, teardown),
        cmocka_unit_test_setup_teardown(checkpoint_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(user_database_directory, setup, teardown),
        cmocka_unit_test_setup_teardown(registry_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(freeze_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(replicate_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(wake_bound_and_restore_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(read_write_paths_and_the_view, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
