/* Tests of common/log: the "<N>" stderr format with structured fields, the
 * priority filter, and how JOURNAL_STREAM is recognised. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/log.h"

static char capture_path[] = "/tmp/act-log-test-XXXXXX";
static int saved_stderr = -1;

/* Points stderr at a fresh temporary file. */
static int capture_start(void **state)
{
    (void)state;
    strcpy(capture_path, "/tmp/act-log-test-XXXXXX");
    int fd = mkstemp(capture_path);
    if (fd < 0)
        return -1;
    fflush(stderr);
    saved_stderr = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);
    unsetenv("JOURNAL_STREAM");
    act_log_reset_target();
    act_log_set_max_priority(LOG_INFO);
    return 0;
}

static int capture_stop(void **state)
{
    (void)state;
    fflush(stderr);
    dup2(saved_stderr, STDERR_FILENO);
    close(saved_stderr);
    unlink(capture_path);
    unsetenv("JOURNAL_STREAM");
    act_log_reset_target();
    return 0;
}

static char *captured(void)
{
    static char buf[4096];
    fflush(stderr);
    int fd = open(capture_path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    assert_true(n >= 0);
    buf[n] = '\0';
    return buf;
}

static void plain_message_has_priority_prefix(void **state)
{
    (void)state;
    act_log(LOG_ERR, "host %s: %d failures", "web1", 3);
    act_log(LOG_INFO, "started");
    assert_string_equal(captured(), "<3>host web1: 3 failures\n<6>started\n");
}

static void fields_follow_the_message(void **state)
{
    (void)state;
    act_log_ctx ctx = {
        .host = "web1", .generation = 4, .build = "v2@sha256:ab", .reason = "ready_timeout"};
    act_log_fields(LOG_WARNING, &ctx, "generation %d not ready", 4);
    act_log_ctx some = {.host = "db", .reason = "not_owner"};
    act_log_fields(LOG_NOTICE, &some, "refused");
    act_log_fields(LOG_INFO, NULL, "no fields");
    act_log_ctx none = {0};
    act_log_fields(LOG_INFO, &none, "empty ctx");
    assert_string_equal(captured(),
                        "<4>generation 4 not ready [HOST=web1 GENERATION=4 BUILD=v2@sha256:ab "
                        "REASON=ready_timeout]\n"
                        "<5>refused [HOST=db REASON=not_owner]\n"
                        "<6>no fields\n"
                        "<6>empty ctx\n");
}

static void priority_filter_drops_debug(void **state)
{
    (void)state;
    act_log(LOG_DEBUG, "hidden");
    act_log_set_max_priority(LOG_DEBUG);
    act_log(LOG_DEBUG, "shown");
    act_log_set_max_priority(LOG_ERR);
    act_log(LOG_WARNING, "hidden too");
    assert_string_equal(captured(), "<7>shown\n");
}

static void journal_stream_must_name_our_stderr(void **state)
{
    (void)state;
    struct stat st;
    assert_int_equal(fstat(STDERR_FILENO, &st), 0);
    char value[64];
    snprintf(value, sizeof(value), "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
    setenv("JOURNAL_STREAM", value, 1);
    assert_true(act_log_stderr_is_journal());

    /* Another file's inode (a stderr inherited from elsewhere, then
     * redirected) is not the journal. */
    snprintf(value, sizeof(value), "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino + 1);
    setenv("JOURNAL_STREAM", value, 1);
    assert_false(act_log_stderr_is_journal());
    const char *junk[] = {"", "12", "a:b", "1:2:3", "1:2x"};
    for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
        setenv("JOURNAL_STREAM", junk[i], 1);
        assert_false(act_log_stderr_is_journal());
    }
    unsetenv("JOURNAL_STREAM");
    assert_false(act_log_stderr_is_journal());
}

static void unreachable_journal_falls_back_to_stderr(void **state)
{
    (void)state;
    if (access("/run/systemd/journal/socket", F_OK) == 0) {
        /* With journald running the message goes there; nothing to see on
         * stderr, and reading the journal back is journalctl's job. */
        skip();
    }
    struct stat st;
    assert_int_equal(fstat(STDERR_FILENO, &st), 0);
    char value[64];
    snprintf(value, sizeof(value), "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
    setenv("JOURNAL_STREAM", value, 1);
    act_log_reset_target();
    act_log_ctx ctx = {.host = "web1"};
    act_log_fields(LOG_ERR, &ctx, "not lost");
    assert_string_equal(captured(), "<3>not lost [HOST=web1]\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(plain_message_has_priority_prefix, capture_start,
                                        capture_stop),
        cmocka_unit_test_setup_teardown(fields_follow_the_message, capture_start, capture_stop),
        cmocka_unit_test_setup_teardown(priority_filter_drops_debug, capture_start, capture_stop),
        cmocka_unit_test_setup_teardown(journal_stream_must_name_our_stderr, capture_start,
                                        capture_stop),
        cmocka_unit_test_setup_teardown(unreachable_journal_falls_back_to_stderr, capture_start,
                                        capture_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
