/* The answers of the user database service (accounts/userdb.h) on their
 * own: each host's user and group found by id and by name, every record
 * streamed when more are asked for, and each bad call answered with the
 * error systemd's clients know, never with a record. */
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
#include <json-c/json.h>

#include "activator/daemon/accounts/dynamic_users.h"
#include "activator/daemon/accounts/userdb.h"

#define MACHINE "0123456789abcdef0123456789abcdef"

static char dir[64];
static int dirfd_ = -1;
static ad_dynamic_users *users;
static uint32_t web1, web2;

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/act-userdb-XXXXXX");
    if (!mkdtemp(dir) || (dirfd_ = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        return -1;
    act_error err = {0};
    uid_t uid = 0;
    if (ad_dynamic_users_open(dirfd_, 1879048192u, 1879113727u, &users, &err) < 0 ||
        ad_dynamic_user_get(users, "web1", &uid, &err) < 0)
        return -1;
    web1 = uid;
    if (ad_dynamic_user_get(users, "web2", &uid, &err) < 0)
        return -1;
    web2 = uid;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ad_dynamic_users_free(users);
    close(dirfd_);
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

/* The messages the call gets, parsed, at most max; returns how many. */
static size_t ask(const char *call, json_object **messages, size_t max)
{
    char *reply = NULL;
    size_t len = 0;
    assert_int_equal(ad_userdb_answer(users, MACHINE, call, strlen(call), &reply, &len), 0);
    size_t n = 0;
    for (size_t at = 0; reply && at < len && n < max;) {
        size_t end = at + strlen(reply + at);
        assert_true(end < len); /* every message ends with its NUL */
        messages[n] = json_tokener_parse(reply + at);
        assert_non_null(messages[n]);
        n++;
        at = end + 1;
    }
    free(reply);
    return n;
}

static const char *str(json_object *o, const char *key)
{
    json_object *v = NULL;
    return json_object_object_get_ex(o, key, &v) ? json_object_get_string(v) : NULL;
}

static json_object *obj(json_object *o, const char *key)
{
    json_object *v = NULL;
    return json_object_object_get_ex(o, key, &v) ? v : NULL;
}

/* The one message of call must be the error named. */
static void expect_error(const char *call, const char *error)
{
    json_object *m[4];
    size_t n = ask(call, m, 4);
    assert_int_equal(n, 1);
    if (!str(m[0], "error") || strcmp(str(m[0], "error"), error) != 0)
        fail_msg("%s answered %s, expected the error %s", call, json_object_to_json_string(m[0]),
                 error);
    assert_null(obj(obj(m[0], "parameters"), "record"));
    json_object_put(m[0]);
}

static json_object *record_of(json_object *message)
{
    json_object *record = obj(obj(message, "parameters"), "record");
    assert_non_null(record);
    return record;
}

static void by_id_and_by_name(void **state)
{
    (void)state;
    char call[512];
    snprintf(call, sizeof(call),
             "{\"method\":\"io.systemd.UserDatabase.GetUserRecord\",\"parameters\":{\"uid\":%u,"
             "\"service\":\"" AD_USERDB_SERVICE "\"}}",
             web1);
    json_object *m[4];
    assert_int_equal(ask(call, m, 4), 1);
    json_object *record = record_of(m[0]);
    assert_string_equal(str(record, "userName"), "act-web1");
    assert_int_equal(json_object_get_int64(obj(record, "uid")), web1);
    assert_int_equal(json_object_get_int64(obj(record, "gid")), web1);
    assert_string_equal(str(record, "disposition"), "dynamic");
    /* The service, for this machine: what systemd's clients require. */
    assert_string_equal(str(obj(obj(record, "status"), MACHINE), "service"), AD_USERDB_SERVICE);
    assert_null(obj(m[0], "continues"));
    json_object_put(m[0]);

    assert_int_equal(ask("{\"method\":\"io.systemd.UserDatabase.GetUserRecord\",\"parameters\":"
                         "{\"userName\":\"act-web2\",\"service\":\"" AD_USERDB_SERVICE "\"}}",
                         m, 4),
                     1);
    assert_int_equal(json_object_get_int64(obj(record_of(m[0]), "uid")), web2);
    json_object_put(m[0]);

    snprintf(call, sizeof(call),
             "{\"method\":\"io.systemd.UserDatabase.GetGroupRecord\",\"parameters\":{\"gid\":%u,"
             "\"service\":\"" AD_USERDB_SERVICE "\"}}",
             web2);
    assert_int_equal(ask(call, m, 4), 1);
    assert_string_equal(str(record_of(m[0]), "groupName"), "act-web2");
    json_object_put(m[0]);

    /* Both, and they agree. */
    snprintf(call, sizeof(call),
             "{\"method\":\"io.systemd.UserDatabase.GetUserRecord\",\"parameters\":{\"uid\":%u,"
             "\"userName\":\"act-web1\",\"service\":\"" AD_USERDB_SERVICE "\"}}",
             web1);
    assert_int_equal(ask(call, m, 4), 1);
    assert_string_equal(str(record_of(m[0]), "userName"), "act-web1");
    json_object_put(m[0]);
}

static void every_record_when_more_are_asked_for(void **state)
{
    (void)state;
    json_object *m[8];
    size_t n = ask("{\"method\":\"io.systemd.UserDatabase.GetUserRecord\",\"parameters\":"
                   "{\"service\":\"" AD_USERDB_SERVICE "\"},\"more\":true}",
                   m, 8);
    assert_int_equal(n, 2);
    bool seen1 = false, seen2 = false;
    for (size_t i = 0; i < n; i++) {
        const char *name = str(record_of(m[i]), "userName");
        seen1 |= strcmp(name, "act-web1") == 0;
        seen2 |= strcmp(name, "act-web2") == 0;
        /* All but the last say more follow. */
        json_object *continues = obj(m[i], "continues");
        assert_true(i + 1 < n ? continues && json_object_get_boolean(continues) : !continues);
        json_object_put(m[i]);
    }
    assert_true(seen1 && seen2);
    expect_error("{\"method\":\"io.systemd.UserDatabase.GetUserRecord\",\"parameters\":"
                 "{\"service\":\"" AD_USERDB_SERVICE "\"}}",
                 "org.varlink.service.ExpectedMore");
}

static void bad_calls_get_errors(void **state)
{
    (void)state;
    char call[512];
    expect_error("{\"method\":\"io.systemd.UserDatabase.GetUserRecord\",\"parameters\":"
                 "{\"uid\":5,\"service\":\"" AD_USERDB_SERVICE "\"}}",
                 "io.systemd.UserDatabase.NoRecordFound");
    expect_error("{\"method\":\"io.systemd.UserDatabase.GetUserRecord\",\"parameters\":"
                 "{\"userName\":\"root\",\"service\":\"" AD_USERDB_SERVICE "\"}}",
                 "io.systemd.UserDatabase.NoRecordFound");
    expect_error("{\"method\":\"io.systemd.UserDatabase.GetUserRecord\",\"parameters\":"
                 "{\"userName\":\"act-nobody\",\"service\":\"" AD_USERDB_SERVICE "\"}}",
                 "io.systemd.UserDatabase.NoRecordFound");
    snprintf(call, sizeof(call),
             "{\"method\":\"io.systemd.UserDatabase.GetUserRecord\",\"parameters\":{\"uid\":%u,"
             "\"userName\":\"act-web2\",\"service\":\"" AD_USERDB_SERVICE "\"}}",
             web1);
    expect_error(call, "io.systemd.UserDatabase.ConflictingRecordFound");
    snprintf(call, sizeof(call),
             "{\"method\":\"io.systemd.UserDatabase.GetUserRecord\",\"parameters\":{\"uid\":%u,"
             "\"service\":\"io.systemd.Multiplexer\"}}",
             web1);
    expect_error(call, "io.systemd.UserDatabase.BadService");
    snprintf(call, sizeof(call),
             "{\"method\":\"io.systemd.UserDatabase.GetUserRecord\",\"parameters\":{\"uid\":%u}}",
             web1);
    expect_error(call, "io.systemd.UserDatabase.BadService");
    expect_error("{\"method\":\"io.systemd.UserDatabase.GetUserRecord\",\"parameters\":"
                 "{\"uid\":\"many\",\"service\":\"" AD_USERDB_SERVICE "\"}}",
                 "org.varlink.service.InvalidParameter");
    expect_error("{\"method\":\"io.systemd.UserDatabase.GetMemberships\",\"parameters\":"
                 "{\"userName\":\"act-web1\",\"service\":\"" AD_USERDB_SERVICE "\"}}",
                 "io.systemd.UserDatabase.NoRecordFound");
    expect_error("{\"method\":\"io.systemd.Machine.Kill\",\"parameters\":{}}",
                 "org.varlink.service.MethodNotFound");
    expect_error("{\"method\":", "org.varlink.service.InvalidParameter");
    expect_error("[1,2]", "org.varlink.service.InvalidParameter");
    expect_error("{\"method\":7}", "org.varlink.service.InvalidParameter");

    /* A oneway call gets no answer at all. */
    json_object *m[2];
    assert_int_equal(ask("{\"method\":\"io.systemd.UserDatabase.GetUserRecord\",\"oneway\":true,"
                         "\"parameters\":{\"service\":\"" AD_USERDB_SERVICE "\"}}",
                         m, 2),
                     0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(by_id_and_by_name),
        cmocka_unit_test(every_record_when_more_are_asked_for),
        cmocka_unit_test(bad_calls_get_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
