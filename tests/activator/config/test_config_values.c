/* Unit tests of the configuration value parsers: good values and, for each,
 * the bad values a person is likely to write. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "activator/config/parse-account.h"
#include "activator/config/parse-duration.h"
#include "activator/config/parse-env.h"
#include "activator/config/parse-number.h"
#include "activator/config/parse-path.h"
#include "activator/config/parse-size.h"
#include "activator/config/parse-syscalls.h"
#include "activator/config/parse-url.h"
#include "activator/config/split-argv.h"
#include "common/cleanup.h"

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
    assert_int_equal(act_parse_size("512M", &v, &err), 0);
    assert_int_equal(v, 512ULL << 20);
    assert_int_equal(act_parse_size("1G", &v, &err), 0);
    assert_int_equal(v, 1ULL << 30);
    assert_int_equal(act_parse_size("1.5G", &v, &err), 0);
    assert_int_equal(v, 3ULL << 29);
    assert_int_equal(act_parse_size("4096", &v, &err), 0);
    assert_int_equal(v, 4096);
    assert_int_equal(act_parse_size("2K", &v, &err), 0);
    assert_int_equal(v, 2048);
    assert_int_equal(act_parse_size("infinity", &v, &err), 0);
    assert_true(v == ACT_SIZE_INFINITY);

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
                         "1e9"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        v = 7;
        err = (act_error){0};
        assert_true(act_parse_size(bad[i], &v, &err) < 0);
        assert_int_equal(v, 7); /* untouched on failure */
        assert_actionable(&err);
    }
}

static void durations(void **state)
{
    (void)state;
    uint64_t v = 0;
    act_error err = {0};
    assert_int_equal(act_parse_duration("30", &v, &err), 0);
    assert_int_equal(v, 30 * ACT_USEC_PER_SEC);
    assert_int_equal(act_parse_duration("500ms", &v, &err), 0);
    assert_int_equal(v, 500000);
    assert_int_equal(act_parse_duration("1min 30s", &v, &err), 0);
    assert_int_equal(v, 90 * ACT_USEC_PER_SEC);
    assert_int_equal(act_parse_duration("1.5s", &v, &err), 0);
    assert_int_equal(v, 1500000);
    assert_int_equal(act_parse_duration("2h", &v, &err), 0);
    assert_int_equal(v, 7200 * ACT_USEC_PER_SEC);
    assert_int_equal(act_parse_duration("0", &v, &err), 0);
    assert_int_equal(v, 0);

    const char *bad[] = {"", "s", "10x", "-5", "5 parsecs", "1..5s", "ten", "99999999999999999d"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        err = (act_error){0};
        assert_true(act_parse_duration(bad[i], &v, &err) < 0);
        assert_actionable(&err);
    }

    err = (act_error){0};
    assert_int_equal(
        act_parse_duration_range("45", ACT_USEC_PER_SEC, 30 * ACT_USEC_PER_SEC, &v, &err), -ERANGE);
    assert_non_null(strstr(err.message, "1s to 30s"));
    assert_actionable(&err);

    char text[64];
    act_format_duration(90 * ACT_USEC_PER_SEC + 250000, text, sizeof(text));
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
    assert_int_equal(act_parse_uint("5", 1, 5, &v, &err), 0);
    assert_int_equal(v, 5);
    assert_int_equal(act_parse_uint("6", 1, 5, &v, &err), -ERANGE);
    assert_actionable(&err);
    const char *bad_uint[] = {"", "-1", "+1", "1.0", "0x10", " 1", "five"};
    for (size_t i = 0; i < ARRAY_SIZE(bad_uint); i++) {
        err = (act_error){0};
        assert_true(act_parse_uint(bad_uint[i], 0, 100, &v, &err) < 0);
        assert_actionable(&err);
    }

    assert_int_equal(act_parse_bool("yes", &b, &err), 0);
    assert_true(b);
    assert_int_equal(act_parse_bool("off", &b, &err), 0);
    assert_false(b);
    assert_int_equal(act_parse_bool("maybe", &b, &err), -EINVAL);
    assert_actionable(&err);

    assert_int_equal(act_parse_percent("200%", 1, 100000, &pct, &err), 0);
    assert_int_equal(pct, 200);
    const char *bad_pct[] = {"200", "%", "2.5%", "0%", "-5%", "200 %"};
    for (size_t i = 0; i < ARRAY_SIZE(bad_pct); i++) {
        err = (act_error){0};
        assert_true(act_parse_percent(bad_pct[i], 1, 100000, &pct, &err) < 0);
        assert_actionable(&err);
    }

    assert_int_equal(act_parse_rate("0.5", 1e6, &rate, &err), 0);
    assert_true(rate == 0.5);
    const char *bad_rate[] = {"0", "", "inf", "nan", "1e3", "-1", "1.2.3", ".", "2000000"};
    for (size_t i = 0; i < ARRAY_SIZE(bad_rate); i++) {
        err = (act_error){0};
        assert_true(act_parse_rate(bad_rate[i], 1e6, &rate, &err) < 0);
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

    const char *bad[] = {"bin/x 'open", "bin/x \"open", "bin/x trailing\\"};
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
    assert_int_equal(act_parse_env_assignment("MODE=prod", &err), 0);
    assert_int_equal(act_parse_env_assignment("_X1=", &err), 0);
    const char *bad[] = {
        "MODE", "=x", "1X=2", "A-B=1", "LISTEN_FDS=3", "NOTIFY_SOCKET=/x", "ACTIVATOR_HOST=x",
        "A B=1"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        err = (act_error){0};
        assert_int_equal(act_parse_env_assignment(bad[i], &err), -EINVAL);
        assert_actionable(&err);
    }
    assert_true(act_env_same_key("A=1", "A=2"));
    assert_false(act_env_same_key("A=1", "AB=2"));
}

static void accounts(void **state)
{
    (void)state;
    act_error err = {0};
    const char *good[] = {"web1", "_svc", "www-data", "machine$", "1000", "0"};
    for (size_t i = 0; i < ARRAY_SIZE(good); i++)
        assert_int_equal(act_parse_account_name("user", good[i], &err), 0);
    const char *bad[] = {"",     "1abc", "-x",         "a b",
                         "../x", "x:y",  "4294967295", "abcdefghijabcdefghijabcdefghijabc"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        err = (act_error){0};
        assert_true(act_parse_account_name("user", bad[i], &err) < 0);
        assert_actionable(&err);
    }
}

static void paths(void **state)
{
    (void)state;
    act_error err = {0};
    assert_int_equal(act_parse_absolute_path("/var/lib/activator", &err), 0);
    assert_int_equal(act_parse_build_path("bin/server", &err), 0);
    const char *bad_abs[] = {"", "var/lib", "/var/../etc", "/var/./lib", "/a\nb"};
    for (size_t i = 0; i < ARRAY_SIZE(bad_abs); i++) {
        err = (act_error){0};
        assert_true(act_parse_absolute_path(bad_abs[i], &err) < 0);
        assert_actionable(&err);
    }
    const char *bad_build[] = {"",        "/usr/bin/server", "../server", "bin/../../x",
                               "./bin/x", "bin/\x01x"};
    for (size_t i = 0; i < ARRAY_SIZE(bad_build); i++) {
        err = (act_error){0};
        assert_true(act_parse_build_path(bad_build[i], &err) < 0);
        assert_actionable(&err);
    }
}

static void urls(void **state)
{
    (void)state;
    act_error err = {0};
    assert_int_equal(act_parse_store_url("dir:///var/lib/activator/claims", &err), 0);
    assert_int_equal(act_parse_store_url("etcd://127.0.0.1:2379/activator", &err), 0);
    assert_int_equal(act_parse_store_url("etcd://etcd-1.internal:2379", &err), 0);
    const char *bad_store[] = {"",
                               "dir://relative",
                               "dir:///a/../b",
                               "etcd://",
                               "etcd://h",
                               "etcd://h:99999/x",
                               "etcd://h:2379/a b",
                               "http://h:1/x",
                               "/var/lib/claims"};
    for (size_t i = 0; i < ARRAY_SIZE(bad_store); i++) {
        err = (act_error){0};
        assert_true(act_parse_store_url(bad_store[i], &err) < 0);
        assert_actionable(&err);
    }
    assert_int_equal(act_parse_nng_url("ipc:///run/activator/control.ipc", ACT_URL_IPC, &err), 0);
    assert_int_equal(act_parse_nng_url("tls+tcp://[::1]:7000", ACT_URL_TLS_TCP, &err), 0);
    assert_int_equal(act_parse_nng_url("tcp://127.0.0.1:7000", ACT_URL_IPC | ACT_URL_TCP, &err), 0);
    const char *bad_nng[] = {"tcp://127.0.0.1:7000", "ipc://relative", "tls+tcp://h",
                             "ipc:///"
                             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
    for (size_t i = 0; i < ARRAY_SIZE(bad_nng); i++) {
        err = (act_error){0};
        assert_true(act_parse_nng_url(bad_nng[i], ACT_URL_IPC, &err) < 0);
        assert_actionable(&err);
    }
}

static void syscall_filters(void **state)
{
    (void)state;
    act_error err = {0};
    act_syscall_filter f = {0};
    assert_int_equal(act_parse_syscall_filter("default", &f, &err), 0);
    assert_int_equal(f.base, ACT_SYSCALLS_DEFAULT);
    assert_null(f.deny);
    assert_int_equal(
        act_parse_syscall_filter("default ~ptrace io_uring_setup ~kexec_load", &f, &err), 0);
    assert_int_equal(act_strv_length(f.deny), 2);
    assert_string_equal(f.deny[0], "ptrace");
    assert_string_equal(f.deny[1], "kexec_load");
    assert_int_equal(act_strv_length(f.allow), 1);
    assert_string_equal(f.allow[0], "io_uring_setup");
    assert_int_equal(act_parse_syscall_filter("none ~ptrace", &f, &err), 0);
    assert_int_equal(f.base, ACT_SYSCALLS_NONE);
    act_syscall_filter_clear(&f);

    const char *bad[] = {"",
                         "strict",
                         "~ptrace",
                         "default ~ptrac",
                         "default @mount",
                         "none ptrace",
                         "default 'unclosed"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        err = (act_error){0};
        assert_true(act_parse_syscall_filter(bad[i], &f, &err) < 0);
        assert_null(f.deny);
        assert_actionable(&err);
    }
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
        cmocka_unit_test(paths),
        cmocka_unit_test(urls),
        cmocka_unit_test(syscall_filters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
