/* Unit tests of the configuration value parsers: good values and, for each,
 * the bad values a person is likely to write. */
#include <errno.h>
#include <linux/capability.h>
#include <pwd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "activator/config/config.h"
#include "activator/config/parse/account.h"
#include "activator/config/parse/capabilities.h"
#include "activator/config/parse/duration.h"
#include "activator/config/parse/env.h"
#include "activator/config/parse/number.h"
#include "activator/config/parse/path.h"
#include "activator/config/parse/size.h"
#include "activator/config/parse/syscalls.h"
#include "activator/config/parse/url.h"
#include "common/cleanup.h"
#include "common/paths.h"
#include "common/split-argv.h"

/* Every refusal must say what to do, in parentheses at its end. */
static void assert_actionable(const act_error *err)
{
    assert_true(err->errnum > 0);
    size_t len = strlen(err->message);
    assert_true(len > 10);
    assert_int_equal(err->message[len - 1], ')');
    assert_non_null(strchr(err->message, '('));
}

static void sizes(void **state)
{
    (void)state;
    uint64_t v = 0;
    act_error err = {0};
    assert_int_equal(cfg_parse_size("512M", &v, &err), 0);
    assert_int_equal(v, 512ULL << 20);
    assert_int_equal(cfg_parse_size("1G", &v, &err), 0);
    assert_int_equal(v, 1ULL << 30);
    assert_int_equal(cfg_parse_size("1.5G", &v, &err), 0);
    assert_int_equal(v, 3ULL << 29);
    assert_int_equal(cfg_parse_size("4096", &v, &err), 0);
    assert_int_equal(v, 4096);
    assert_int_equal(cfg_parse_size("2K", &v, &err), 0);
    assert_int_equal(v, 2048);
    assert_int_equal(cfg_parse_size("infinity", &v, &err), 0);
    assert_true(v == CFG_SIZE_INFINITY);
    /* systemd's other forms: E, a B after the number, and a share of the
     * physical memory. */
    assert_int_equal(cfg_parse_size("1E", &v, &err), 0);
    assert_int_equal(v, 1ULL << 60);
    assert_int_equal(cfg_parse_size("4096B", &v, &err), 0);
    assert_int_equal(v, 4096);
    assert_int_equal(cfg_parse_size("512MB", &v, &err), 0);
    assert_int_equal(v, 512ULL << 20);
    uint64_t memory = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    assert_int_equal(cfg_parse_size("50%", &v, &err), 0);
    assert_int_equal(v, memory / 2);
    assert_int_equal(cfg_parse_size("100%", &v, &err), 0);
    assert_int_equal(v, memory);
    assert_int_equal(cfg_parse_size("12.5%", &v, &err), 0);
    assert_int_equal(v, (uint64_t)((unsigned __int128)memory * 1250 / 10000));

    const char *bad[] = {"",
                         "M",
                         "12X",
                         "-1",
                         "1.5",
                         "0",
                         "0M",
                         "1 G",
                         "1.G",
                         ".5G",
                         "99999999999999999999",
                         "16777216T",
                         "infinite",
                         "1e9",
                         "16E",
                         "1.5B",
                         "5b",
                         "0%",
                         "101%",
                         "1000%",
                         "12.555%",
                         "50 %",
                         "%",
                         "-5%",
                         "50%%"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        v = 7;
        err = (act_error){0};
        assert_true(cfg_parse_size(bad[i], &v, &err) < 0);
        assert_int_equal(v, 7); /* untouched on failure */
        assert_actionable(&err);
    }
}

static void durations(void **state)
{
    (void)state;
    uint64_t v = 0;
    act_error err = {0};
    assert_int_equal(cfg_parse_duration("30", &v, &err), 0);
    assert_int_equal(v, 30 * CFG_USEC_PER_SEC);
    assert_int_equal(cfg_parse_duration("500ms", &v, &err), 0);
    assert_int_equal(v, 500000);
    assert_int_equal(cfg_parse_duration("1min 30s", &v, &err), 0);
    assert_int_equal(v, 90 * CFG_USEC_PER_SEC);
    assert_int_equal(cfg_parse_duration("1.5s", &v, &err), 0);
    assert_int_equal(v, 1500000);
    assert_int_equal(cfg_parse_duration("2h", &v, &err), 0);
    assert_int_equal(v, 7200 * CFG_USEC_PER_SEC);
    assert_int_equal(cfg_parse_duration("0", &v, &err), 0);
    assert_int_equal(v, 0);
    /* systemd.time(7)'s other forms. */
    static const struct {
        const char *text;
        uint64_t usec;
    } systemd_forms[] = {
        {"1min30s", 90 * CFG_USEC_PER_SEC},
        {"1min 30", 90 * CFG_USEC_PER_SEC},
        {"5 min", 300 * CFG_USEC_PER_SEC},
        {"30 5", 35 * CFG_USEC_PER_SEC},
        {"1h 2m 3s 4ms 5us", 3723004005},
        {"2w", 14 * 86400 * CFG_USEC_PER_SEC},
        {"1M", 2629800 * CFG_USEC_PER_SEC},
        {"1y", 31557600 * CFG_USEC_PER_SEC},
        {"2 years 1 month", (2 * 31557600 + 2629800) * CFG_USEC_PER_SEC},
        {"3\xce\xbcs", 3},
        {"3\xc2\xb5s", 3},
        {"1.5min", 90 * CFG_USEC_PER_SEC},
        {"infinity", CFG_USEC_INFINITY},
    };
    for (size_t i = 0; i < ARRAY_SIZE(systemd_forms); i++) {
        err = (act_error){0};
        if (cfg_parse_duration(systemd_forms[i].text, &v, &err) != 0)
            fail_msg("%s: %s", systemd_forms[i].text, err.message);
        assert_int_equal(v, systemd_forms[i].usec);
    }

    const char *bad[] = {"",           "s",          "10x",    "-5",
                         "5 parsecs",  "1..5s",      "ten",    "99999999999999999d",
                         "5S",         "1min30x",    "30s5x",  "Infinity",
                         "infinity 5", "5 infinity", "1.5.5s", "600000000y"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        err = (act_error){0};
        if (cfg_parse_duration(bad[i], &v, &err) == 0)
            fail_msg("\"%s\" was accepted", bad[i]);
        assert_actionable(&err);
    }

    err = (act_error){0};
    assert_int_equal(
        cfg_parse_duration_range("45", CFG_USEC_PER_SEC, 30 * CFG_USEC_PER_SEC, &v, &err), -ERANGE);
    assert_non_null(strstr(err.message, "1s to 30s"));
    assert_actionable(&err);
    /* infinity only where the bounds say so. */
    err = (act_error){0};
    assert_int_equal(cfg_parse_duration_range("infinity", 0, 3600 * CFG_USEC_PER_SEC, &v, &err),
                     -ERANGE);
    assert_non_null(strstr(err.message, "infinity is not allowed here (use 0 to 1h)"));
    assert_int_equal(cfg_parse_duration_range("infinity", 0, CFG_USEC_INFINITY, &v, &err), 0);
    assert_true(v == CFG_USEC_INFINITY);

    char text[64];
    cfg_format_duration(90 * CFG_USEC_PER_SEC + 250000, text, sizeof(text));
    assert_string_equal(text, "1min 30s 250ms");
}

static void numbers(void **state)
{
    (void)state;
    uint64_t v = 0;
    bool b = false;
    uint32_t pct = 0;
    double rate = 0;
    act_error err = {0};
    assert_int_equal(cfg_parse_uint("5", 1, 5, &v, &err), 0);
    assert_int_equal(v, 5);
    assert_int_equal(cfg_parse_uint("6", 1, 5, &v, &err), -ERANGE);
    assert_actionable(&err);
    const char *bad_uint[] = {"", "-1", "+1", "1.0", "0x10", " 1", "five"};
    for (size_t i = 0; i < ARRAY_SIZE(bad_uint); i++) {
        err = (act_error){0};
        assert_true(cfg_parse_uint(bad_uint[i], 0, 100, &v, &err) < 0);
        assert_actionable(&err);
    }

    assert_int_equal(cfg_parse_bool("yes", &b, &err), 0);
    assert_true(b);
    assert_int_equal(cfg_parse_bool("off", &b, &err), 0);
    assert_false(b);
    assert_int_equal(cfg_parse_bool("Y", &b, &err), 0);
    assert_true(b);
    assert_int_equal(cfg_parse_bool("f", &b, &err), 0);
    assert_false(b);
    assert_int_equal(cfg_parse_bool("maybe", &b, &err), -EINVAL);
    assert_actionable(&err);

    assert_int_equal(cfg_parse_percent("200%", 1, 100000, &pct, &err), 0);
    assert_int_equal(pct, 200);
    const char *bad_pct[] = {"200", "%", "2.5%", "0%", "-5%", "200 %"};
    for (size_t i = 0; i < ARRAY_SIZE(bad_pct); i++) {
        err = (act_error){0};
        assert_true(cfg_parse_percent(bad_pct[i], 1, 100000, &pct, &err) < 0);
        assert_actionable(&err);
    }

    assert_int_equal(cfg_parse_rate("0.5", 1e6, &rate, &err), 0);
    assert_true(rate == 0.5);
    const char *bad_rate[] = {"0", "", "inf", "nan", "1e3", "-1", "1.2.3", ".", "2000000"};
    for (size_t i = 0; i < ARRAY_SIZE(bad_rate); i++) {
        err = (act_error){0};
        assert_true(cfg_parse_rate(bad_rate[i], 1e6, &rate, &err) < 0);
        assert_actionable(&err);
    }
}

static void argv_splitting(void **state)
{
    (void)state;
    act_error err = {0};
    _cleanup_(act_strv_freep) char **argv = NULL;
    assert_int_equal(
        act_split_argv("bin/server --title 'a b' \"c \\\"d\\\"\" e\\ f x\"y z\"w ''", &argv, &err),
        0);
    assert_int_equal(act_strv_length(argv), 7);
    assert_string_equal(argv[0], "bin/server");
    assert_string_equal(argv[1], "--title");
    assert_string_equal(argv[2], "a b");
    assert_string_equal(argv[3], "c \"d\"");
    assert_string_equal(argv[4], "e f");
    assert_string_equal(argv[5], "xy zw");
    assert_string_equal(argv[6], "");
    assert_null(argv[7]);

    _cleanup_(act_strv_freep) char **none = NULL;
    assert_int_equal(act_split_argv("   ", &none, &err), 0);
    assert_null(none[0]);

    /* Shell syntax is not interpreted: no expansion, no operators. */
    _cleanup_(act_strv_freep) char **literal = NULL;
    assert_int_equal(act_split_argv("echo $HOME;rm", &literal, &err), 0);
    assert_string_equal(literal[1], "$HOME;rm");

    /* systemd's C escapes, inside quotes too. */
    _cleanup_(act_strv_freep) char **escaped = NULL;
    assert_int_equal(
        act_split_argv("a\\tb \"line1\\nline2\" 'it\\'s' \\x41\\102\\s\\u00e9\\U0001F600 "
                       "\\a\\b\\f\\r\\v\\\\",
                       &escaped, &err),
        0);
    assert_int_equal(act_strv_length(escaped), 5);
    assert_string_equal(escaped[0], "a\tb");
    assert_string_equal(escaped[1], "line1\nline2");
    assert_string_equal(escaped[2], "it's");
    assert_string_equal(escaped[3], "AB \xc3\xa9\xf0\x9f\x98\x80");
    assert_string_equal(escaped[4], "\a\b\f\r\v\\");

    const char *bad[] = {"bin/x 'open",   "bin/x \"open",      "bin/x trailing\\", "bin/x \\d",
                         "bin/x \\x0",    "bin/x \\x00",       "bin/x \\000",      "bin/x \\u0000",
                         "bin/x \\uD800", "bin/x \\U00110000", "bin/x '\\q'",      "bin/x \\8"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        char **out = NULL;
        err = (act_error){0};
        assert_int_equal(act_split_argv(bad[i], &out, &err), -EINVAL);
        assert_null(out);
        assert_actionable(&err);
    }
}

static void environment_words(void **state)
{
    (void)state;
    act_error err = {0};
    assert_int_equal(cfg_parse_env_assignment("MODE=prod", &err), 0);
    assert_int_equal(cfg_parse_env_assignment("_X1=", &err), 0);
    const char *bad[] = {
        "MODE", "=x", "1X=2", "A-B=1", "LISTEN_FDS=3", "NOTIFY_SOCKET=/x", "ACTIVATOR_HOST=x",
        "A B=1"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        err = (act_error){0};
        assert_int_equal(cfg_parse_env_assignment(bad[i], &err), -EINVAL);
        assert_actionable(&err);
    }
    assert_true(cfg_env_same_key("A=1", "A=2"));
    assert_false(cfg_env_same_key("A=1", "AB=2"));
}

static void accounts(void **state)
{
    (void)state;
    act_error err = {0};
    const char *good[] = {"web1", "_svc", "www-data", "machine$", "1000", "0"};
    for (size_t i = 0; i < ARRAY_SIZE(good); i++)
        assert_int_equal(cfg_parse_account_name("user", good[i], &err), 0);
    const char *bad[] = {"",           "1abc",  "-x",
                         "a b",        "../x",  "x:y",
                         "4294967295", "65535", "abcdefghijabcdefghijabcdefghijabc"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        err = (act_error){0};
        assert_true(cfg_parse_account_name("user", bad[i], &err) < 0);
        assert_actionable(&err);
    }
}

/* A uid no passwd entry names, searched from the top of the range down. */
static uid_t unnamed_uid(void)
{
    for (uid_t uid = 3999999999u; uid > 3999999000u; uid--)
        if (!getpwuid(uid))
            return uid;
    fail_msg("every uid from 3999999000 up has a passwd entry");
    return 0;
}

static void users_resolve_by_name_or_number(void **state)
{
    (void)state;
    act_error err = {0};
    uid_t uid = 7;
    gid_t gid = 7;
    assert_int_equal(cfg_resolve_user("User", "root", &uid, &gid, &err), 0);
    assert_int_equal(uid, 0);
    assert_int_equal(gid, 0);
    uid = gid = 7;
    assert_int_equal(cfg_resolve_user("User", "0", &uid, &gid, &err), 0);
    assert_int_equal(uid, 0);
    assert_int_equal(gid, 0);

    /* A number with an entry takes the entry's primary group, which need
     * not be the same number (Debian's sync is uid 4, gid 65534). */
    struct passwd *entry;
    setpwent();
    while ((entry = getpwent()) && entry->pw_uid == entry->pw_gid)
        ;
    if (entry) {
        char number[16];
        uid_t want_uid = entry->pw_uid;
        gid_t want_gid = entry->pw_gid;
        snprintf(number, sizeof(number), "%u", (unsigned)want_uid);
        endpwent();
        assert_int_equal(cfg_resolve_user("User", number, &uid, &gid, &err), 0);
        assert_int_equal(uid, want_uid);
        assert_int_equal(gid, want_gid);
    } else {
        endpwent();
    }

    /* A number without an entry runs as itself, its group the same number. */
    uid_t unnamed = unnamed_uid();
    char number[16];
    snprintf(number, sizeof(number), "%u", (unsigned)unnamed);
    assert_int_equal(cfg_resolve_user("User", number, &uid, &gid, &err), 0);
    assert_int_equal(uid, unnamed);
    assert_int_equal(gid, unnamed);

    err = (act_error){0};
    assert_int_equal(cfg_resolve_user("User", "nosuchuser_act", &uid, &gid, &err), -ENOENT);
    assert_string_equal(err.message,
                        "User=nosuchuser_act: no such user on this box; create it or change User=");
    err = (act_error){0};
    assert_int_equal(cfg_resolve_user("User", "bad user", &uid, &gid, &err), -EINVAL);
    assert_non_null(strstr(err.message, "User: \"bad user\" is not a valid user name"));
    err = (act_error){0};
    assert_int_equal(cfg_resolve_user("User", "4294967295", &uid, &gid, &err), -ERANGE);
}

static void groups_resolve_by_name_or_number(void **state)
{
    (void)state;
    act_error err = {0};
    gid_t gid = 7;
    assert_int_equal(cfg_resolve_group("Group", "root", &gid, &err), 0);
    assert_int_equal(gid, 0);
    /* A number is the gid whether or not a group entry names it. */
    assert_int_equal(cfg_resolve_group("ControlGroup", "3999999999", &gid, &err), 0);
    assert_int_equal(gid, 3999999999u);
    assert_int_equal(cfg_resolve_group("ControlGroup", "nosuchgroup_act", &gid, &err), -ENOENT);
    assert_string_equal(err.message, "ControlGroup=nosuchgroup_act: no such group on this box; "
                                     "create it or change ControlGroup=");
    err = (act_error){0};
    assert_int_equal(cfg_resolve_group("Group", "65535", &gid, &err), -ERANGE);
    assert_true(strncmp(err.message, "Group: ", 7) == 0);
}

/* A host's User= and Group= together: Group= replaces the user's group. */
static void host_credentials_combine_user_and_group(void **state)
{
    (void)state;
    char number[16];
    snprintf(number, sizeof(number), "%u", (unsigned)unnamed_uid());
    cfg_host host = {.name = "web1", .user = number, .group = "root"};
    uid_t uid = 7;
    gid_t gid = 7;
    bool have = false;
    act_error err = {0};
    assert_int_equal(cfg_host_credentials(&host, &uid, &gid, &have, &err), 0);
    assert_true(have);
    assert_int_equal(uid, strtoul(number, NULL, 10));
    assert_int_equal(gid, 0);

    host.group = NULL;
    assert_int_equal(cfg_host_credentials(&host, &uid, &gid, &have, &err), 0);
    assert_int_equal(gid, uid);

    host.user = "nosuchuser_act";
    assert_int_equal(cfg_host_credentials(&host, &uid, &gid, &have, &err), -ENOENT);
    assert_false(have);
    assert_non_null(strstr(err.message, "host web1: User=nosuchuser_act: no such user"));

    host.user = NULL;
    host.group = "root";
    assert_int_equal(cfg_host_credentials(&host, &uid, &gid, &have, &err), 0);
    assert_false(have);
}

static void paths(void **state)
{
    (void)state;
    act_error err = {0};
    assert_int_equal(act_path_check_absolute("/var/lib/activator", &err), 0);
    assert_int_equal(cfg_parse_build_path("bin/server", &err), 0);
    const char *bad_abs[] = {"", "var/lib", "/var/../etc", "/var/./lib", "/a\nb"};
    for (size_t i = 0; i < ARRAY_SIZE(bad_abs); i++) {
        err = (act_error){0};
        assert_true(act_path_check_absolute(bad_abs[i], &err) < 0);
        assert_actionable(&err);
    }
    const char *bad_build[] = {"",        "/usr/bin/server", "../server", "bin/../../x",
                               "./bin/x", "bin/\x01x"};
    for (size_t i = 0; i < ARRAY_SIZE(bad_build); i++) {
        err = (act_error){0};
        assert_true(cfg_parse_build_path(bad_build[i], &err) < 0);
        assert_actionable(&err);
    }
}

static void urls(void **state)
{
    (void)state;
    act_error err = {0};
    assert_int_equal(cfg_parse_nng_url("ipc:///run/activator/control.ipc", CFG_URL_IPC, &err), 0);
    assert_int_equal(cfg_parse_nng_url("tls+tcp://[::1]:7000", CFG_URL_TLS_TCP, &err), 0);
    assert_int_equal(cfg_parse_nng_url("tcp://127.0.0.1:7000", CFG_URL_IPC | CFG_URL_TCP, &err), 0);
    const char *bad_nng[] = {"tcp://127.0.0.1:7000", "ipc://relative", "tls+tcp://h",
                             "ipc:///"
                             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
    for (size_t i = 0; i < ARRAY_SIZE(bad_nng); i++) {
        err = (act_error){0};
        assert_true(cfg_parse_nng_url(bad_nng[i], CFG_URL_IPC, &err) < 0);
        assert_actionable(&err);
    }
}

static void syscall_filters(void **state)
{
    (void)state;
    act_error err = {0};
    cfg_syscall_filter f = {0};
    assert_int_equal(cfg_parse_syscall_filter("~ptrace kexec_load", &f, &err), 0);
    assert_int_equal(f.base, CFG_SYSCALLS_DEFAULT);
    assert_int_equal(act_strv_length(f.deny), 2);
    assert_string_equal(f.deny[0], "ptrace");
    assert_string_equal(f.deny[1], "kexec_load");
    assert_int_equal(cfg_parse_syscall_filter("io_uring_setup", &f, &err), 0);
    assert_int_equal(act_strv_length(f.allow), 1);
    assert_string_equal(f.allow[0], "io_uring_setup");
    cfg_syscall_filter_clear(&f);

    /* The activator's own older words are no longer read: "default" and
     * "none" are not system calls. */
    const char *bad[] = {"strict",         "~ptrac",    "@nosuchgroup",    "~@mount keyctl:EPERM",
                         "@mount ~chroot", "'unclosed", "default ~ptrace", "none ~kexec_load"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        err = (act_error){0};
        assert_true(cfg_parse_syscall_filter(bad[i], &f, &err) < 0);
        assert_null(f.deny);
        assert_actionable(&err);
    }
}

static bool has_name(char *const *list, const char *name)
{
    for (size_t i = 0; list && list[i]; i++)
        if (strcmp(list[i], name) == 0)
            return true;
    return false;
}

/* systemd's syntax: groups expand, ~ makes a line a deny line, lines add
 * up in order, and an empty one resets to no filter until the next line
 * picks the kind of list. A bad line changes nothing. */
static void syscall_filter_lines_accumulate(void **state)
{
    (void)state;
    act_error err = {0};
    cfg_syscall_filter f = {0};
    assert_int_equal(cfg_parse_syscall_filter("~@mount keyctl", &f, &err), 0);
    assert_int_equal(f.base, CFG_SYSCALLS_DEFAULT);
    assert_true(has_name(f.deny, "mount") && has_name(f.deny, "chroot") &&
                has_name(f.deny, "keyctl"));
    assert_int_equal(cfg_parse_syscall_filter("chroot @aio", &f, &err), 0);
    assert_false(has_name(f.deny, "chroot"));
    assert_true(has_name(f.allow, "chroot") && has_name(f.allow, "io_uring_setup"));
    assert_true(has_name(f.deny, "mount"));
    assert_int_equal(cfg_parse_syscall_filter("~io_uring_setup", &f, &err), 0);
    assert_false(has_name(f.allow, "io_uring_setup"));
    assert_true(has_name(f.deny, "io_uring_setup"));
    /* A bad name keeps what the lines before made. */
    size_t n_deny = act_strv_length(f.deny);
    assert_true(cfg_parse_syscall_filter("~mount nosuchcall", &f, &err) < 0);
    assert_non_null(strstr(err.message, "nosuchcall"));
    assert_int_equal(act_strv_length(f.deny), n_deny);

    assert_int_equal(cfg_parse_syscall_filter("", &f, &err), 0);
    assert_true(f.reset);
    assert_null(f.allow);
    assert_null(f.deny);
    assert_int_equal(cfg_parse_syscall_filter("~@mount", &f, &err), 0);
    assert_false(f.reset);
    assert_int_equal(f.base, CFG_SYSCALLS_NONE);
    assert_true(has_name(f.deny, "pivot_root"));
    assert_int_equal(cfg_parse_syscall_filter("", &f, &err), 0);
    assert_int_equal(cfg_parse_syscall_filter("@basic-io @default", &f, &err), 0);
    assert_int_equal(f.base, CFG_SYSCALLS_ALLOW);
    assert_true(has_name(f.allow, "read") && has_name(f.allow, "exit_group"));
    cfg_syscall_filter_clear(&f);
}

static void capabilities(void **state)
{
    (void)state;
    act_error err = {0};
    uint64_t mask = 0;
    assert_int_equal(cfg_parse_capabilities("CAP_NET_BIND_SERVICE", &mask, &err), 0);
    assert_int_equal(mask, 1ULL << CAP_NET_BIND_SERVICE);
    assert_int_equal(cfg_parse_capabilities("cap_kill CAP_NET_RAW", &mask, &err), 0);
    assert_int_equal(mask,
                     (1ULL << CAP_NET_BIND_SERVICE) | (1ULL << CAP_KILL) | (1ULL << CAP_NET_RAW));
    char names[256];
    cfg_format_capabilities(mask, names, sizeof(names));
    assert_string_equal(names, "CAP_KILL CAP_NET_BIND_SERVICE CAP_NET_RAW");
    assert_int_equal(cfg_parse_capabilities("", &mask, &err), 0);
    assert_int_equal(mask, 0);
    assert_int_equal(cfg_parse_capabilities("~CAP_SYS_ADMIN", &mask, &err), 0);
    assert_true(mask & (1ULL << CAP_CHOWN));
    assert_false(mask & (1ULL << CAP_SYS_ADMIN));
    mask = 0;
    const char *bad[] = {"CAP_NET_BIND_SERVIC", "NET_BIND_SERVICE", "CAP_KILL 12", "'unclosed"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        err = (act_error){0};
        assert_true(cfg_parse_capabilities(bad[i], &mask, &err) < 0);
        assert_int_equal(mask, 0);
        assert_actionable(&err);
    }
    assert_true(cfg_parse_capabilities("CAP_NET_BIND_SERVICE CAP_NOPE", &mask, &err) < 0);
    assert_non_null(strstr(err.message, "CAP_NOPE"));
    assert_non_null(strstr(err.message, "capabilities(7)"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sizes),
        cmocka_unit_test(durations),
        cmocka_unit_test(numbers),
        cmocka_unit_test(argv_splitting),
        cmocka_unit_test(environment_words),
        cmocka_unit_test(accounts),
        cmocka_unit_test(users_resolve_by_name_or_number),
        cmocka_unit_test(groups_resolve_by_name_or_number),
        cmocka_unit_test(host_credentials_combine_user_and_group),
        cmocka_unit_test(paths),
        cmocka_unit_test(urls),
        cmocka_unit_test(syscall_filters),
        cmocka_unit_test(syscall_filter_lines_accumulate),
        cmocka_unit_test(capabilities),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
