/* The dir store's change journal, which feeds its watches:
 *   - a line is applied only whole: a last line without its newline waits;
 *   - a line that is not a change (one torn by a writer that died, which the
 *     next writer ends) is told as malformed and skipped, and the changes
 *     after it still come;
 *   - past its size limit the journal starts afresh with a header naming the
 *     revision it was compacted up to: a watch that read everything before
 *     follows it, a watch from an older revision ends with an error, and so
 *     does a watch whose journal is cut short under it. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <cmocka.h>

#include "claims/store_dir.h"
#include "common/clock.h"
#include "store_fixture.h"

static store_fixture fixture;

typedef struct journal_case {
    char url[512];
    char journal[600];
    claim_store *store;
    sd_event *event;
} journal_case;

static void open_case(journal_case *jc)
{
    jc->store = fixture_open_on_loop(&fixture, jc->url, sizeof(jc->url), NULL, &jc->event);
    snprintf(jc->journal, sizeof(jc->journal), "%s/%s", jc->url + strlen("dir://"),
             DIR_JOURNAL_FILE);
}

static void close_case(journal_case *jc)
{
    fixture_close_on_loop(jc->store, jc->event);
}

static void append(const char *path, const char *text, size_t len)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
}

static uint64_t put(journal_case *jc, const char *host, uint64_t session, uint64_t expected)
{
    act_error err = {0};
    claim c = fixture_claim(host, session);
    uint64_t rev = 0;
    if (claims_cas(jc->store, host, expected, &c, &rev, NULL, &err) != 0)
        fail_msg("cas %s: %s", host, err.message);
    return rev;
}

static void a_line_applies_only_whole_and_a_corrupt_one_is_told(void **state)
{
    journal_case jc;
    open_case(&jc);
    uint64_t rev = put(&jc, "web1", 1, 0);
    fixture_seen s = {0};
    claims_watch *watch = fixture_seen_start(jc.store, rev + 1, &s);
    fixture_seen_run(jc.event, &s, 0, 200);

    /* A writer that died mid-append left a torn line; the next writer ends
     * it first, so the torn line is one malformed change and the next
     * change comes whole. */
    append(jc.journal, "{\"revision\":99,\"ho", 18);
    uint64_t next = put(&jc, "web3", 1, 0);
    fixture_seen_run(jc.event, &s, 2, 3000);
    assert_int_equal(s.error, 0);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.changes[0].kind, CLAIM_CHANGE_MALFORMED);
    assert_int_equal(s.changes[0].revision, 0);
    assert_non_null(strstr(s.changes[0].problem.message, "not a change"));
    assert_int_equal(s.changes[1].kind, CLAIM_CHANGE_PUT);
    assert_string_equal(s.changes[1].claim.host, "web3");
    assert_int_equal(s.changes[1].revision, next);

    /* Half a line, as a writer mid-append leaves it: nothing until the
     * rest of it is there. */
    char line[256];
    int len =
        snprintf(line, sizeof(line), "{\"revision\":%llu,\"host\":\"web2\",\"deleted\":true}\n",
                 (unsigned long long)next + 1);
    append(jc.journal, line, 20);
    fixture_seen_run(jc.event, &s, 3, 300);
    assert_int_equal(s.n, 2);
    append(jc.journal, line + 20, (size_t)len - 20);
    fixture_seen_run(jc.event, &s, 3, 3000);
    assert_int_equal(s.n, 3);
    assert_int_equal(s.changes[2].kind, CLAIM_CHANGE_DELETE);
    assert_string_equal(s.changes[2].claim.host, "web2");
    assert_int_equal(s.changes[2].revision, next + 1);
    claims_watch_free(watch);
    close_case(&jc);
}

/* Fills the journal past its limit with lines of an old revision, which
 * every watch here skips. */
static void pad_journal(journal_case *jc)
{
    const char *filler = "{\"revision\":1,\"host\":\"filler\",\"deleted\":true}\n";
    size_t filler_len = strlen(filler), total = 0;
    size_t chunk_len = filler_len * 1000;
    char *chunk = malloc(chunk_len);
    for (size_t i = 0; i < 1000; i++)
        memcpy(chunk + i * filler_len, filler, filler_len);
    while (total <= DIR_JOURNAL_MAX) {
        append(jc->journal, chunk, chunk_len);
        total += chunk_len;
    }
    free(chunk);
}

static void compaction_is_followed_by_a_reader_that_kept_up_and_ends_one_behind(void **state)
{
    journal_case jc;
    open_case(&jc);
    uint64_t first = put(&jc, "web1", 1, 0);
    uint64_t second = put(&jc, "web1", 2, first);
    act_error err = {0};
    fixture_seen followed = {0};
    claims_watch *follower = fixture_seen_start(jc.store, second + 1, &followed);
    pad_journal(&jc);
    fixture_seen_run(jc.event, &followed, 0, 500); /* it reads the padding, which it skips */
    assert_int_equal(followed.n, 0);

    uint64_t third = put(&jc, "web1", 3, second);
    struct stat st;
    assert_int_equal(stat(jc.journal, &st), 0);
    assert_true(st.st_size < 4096); /* started afresh */
    fixture_seen_run(jc.event, &followed, 1, 3000);
    if (followed.error)
        fail_msg("the watch that kept up ended: %s", followed.message);
    assert_int_equal(followed.n, 1);
    assert_int_equal(followed.changes[0].revision, third);

    /* A watch from before the compaction cannot get what was dropped. */
    fixture_seen late = {0};
    claims_watch *behind = fixture_seen_start(jc.store, second, &late);
    fixture_seen_run(jc.event, &late, 1, 3000);
    assert_int_equal(late.error, -ENODATA);
    assert_non_null(strstr(late.message, "compacted"));
    claims_watch_free(behind);

    /* From the revision of a fresh list + 1, nothing is missing. */
    claim *claims;
    size_t n;
    uint64_t revision;
    assert_int_equal(claims_list_at(jc.store, &claims, &n, &revision, NULL, NULL, &err), 0);
    free(claims);
    assert_int_equal(revision, third);
    fixture_seen healed = {0};
    behind = fixture_seen_start(jc.store, revision + 1, &healed);
    uint64_t fourth = put(&jc, "web1", 4, third);
    fixture_seen_run(jc.event, &healed, 1, 3000);
    assert_int_equal(healed.error, 0);
    assert_int_equal(healed.n, 1);
    assert_int_equal(healed.changes[0].revision, fourth);
    claims_watch_free(behind);
    claims_watch_free(follower);
    close_case(&jc);
}

static void a_journal_cut_short_under_a_watch_ends_it(void **state)
{
    journal_case jc;
    open_case(&jc);
    uint64_t rev = put(&jc, "web1", 1, 0);
    fixture_seen s = {0};
    claims_watch *watch = fixture_seen_start(jc.store, rev + 1, &s);
    fixture_seen_run(jc.event, &s, 0, 200);
    assert_int_equal(truncate(jc.journal, 0), 0);
    put(&jc, "web2", 1, 0);
    fixture_seen_run(jc.event, &s, 2, 3000);
    assert_int_equal(s.error, -ENODATA);
    assert_non_null(strstr(s.message, "cut"));
    claims_watch_free(watch);
    close_case(&jc);
}

int main(void)
{
    int r = store_fixture_setup(&fixture, "dir");
    if (r != 0)
        return r;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_line_applies_only_whole_and_a_corrupt_one_is_told),
        cmocka_unit_test(compaction_is_followed_by_a_reader_that_kept_up_and_ends_one_behind),
        cmocka_unit_test(a_journal_cut_short_under_a_watch_ends_it),
    };
    r = cmocka_run_group_tests(tests, NULL, NULL);
    store_fixture_teardown(&fixture);
    return r;
}
