/* The dynamic users' allocator on its own, against temporary state
 * directories: a host's uid is a function of its name where that uid is
 * free (so two boxes agree), kept across opens, never another host's or an
 * account's, and a full range or a bad record is refused with a sentence
 * that says what to do. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pwd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "activator/daemon/accounts/dynamic_users.h"

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

typedef struct box {
    char dir[64];
    int fd;
} box;

static void box_open(box *b)
{
    snprintf(b->dir, sizeof(b->dir), "/tmp/act-dynusers-XXXXXX");
    assert_non_null(mkdtemp(b->dir));
    b->fd = open(b->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(b->fd >= 0);
}

static void box_close(box *b)
{
    close(b->fd);
    nftw(b->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static uid_t get(ad_dynamic_users *users, const char *host)
{
    uid_t uid = 0;
    act_error err = {0};
    int r = ad_dynamic_user_get(users, host, &uid, &err);
    if (r < 0)
        fail_msg("%s", err.message);
    return uid;
}

/* Whether dynamic-users/records has the line "<uid> <host>". */
static bool recorded(box *b, uid_t uid, const char *host)
{
    char path[128], line[64], want[64];
    snprintf(path, sizeof(path), "%s/dynamic-users/records", b->dir);
    snprintf(want, sizeof(want), "%u %s\n", (unsigned)uid, host);
    FILE *f = fopen(path, "re");
    bool found = false;
    while (f && !found && fgets(line, sizeof(line), f))
        found = strcmp(line, want) == 0;
    if (f)
        fclose(f);
    return found;
}

static void write_records(box *b, const char *text)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/dynamic-users/records", b->dir);
    FILE *f = fopen(path, "we");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

static ad_dynamic_users *open_users(box *b, uint32_t min, uint32_t max)
{
    ad_dynamic_users *users = NULL;
    act_error err = {0};
    if (ad_dynamic_users_open(b->fd, min, max, &users, &err) < 0)
        fail_msg("%s", err.message);
    return users;
}

static void same_uid_on_every_box_and_after_a_restart(void **state)
{
    (void)state;
    box one, two;
    box_open(&one);
    box_open(&two);
    ad_dynamic_users *a = open_users(&one, 61184, 65519);
    ad_dynamic_users *b = open_users(&two, 61184, 65519);
    uid_t web1 = get(a, "web1"), web2 = get(a, "web2");
    assert_true(web1 >= 61184 && web1 <= 65519);
    assert_int_not_equal(web1, web2);
    assert_int_equal(get(a, "web1"), web1);
    /* Another box, another order: the same uids. */
    assert_int_equal(get(b, "web2"), web2);
    assert_int_equal(get(b, "web1"), web1);
    ad_dynamic_users_free(a);
    ad_dynamic_users_free(b);

    /* One file for every record, no inode per host. */
    assert_true(recorded(&one, web1, "web1") && recorded(&one, web2, "web2"));
    char link[64];
    snprintf(link, sizeof(link), "dynamic-users/%u", (unsigned)web1);
    assert_int_equal(faccessat(one.fd, link, F_OK, AT_SYMLINK_NOFOLLOW), -1);

    /* The next daemon reads the records back. */
    a = open_users(&one, 61184, 65519);
    assert_int_equal(get(a, "web2"), web2);
    assert_int_equal(get(a, "web1"), web1);
    ad_dynamic_users_free(a);
    box_close(&one);
    box_close(&two);
}

static void collisions_probe_on_and_a_full_range_is_refused(void **state)
{
    (void)state;
    box b;
    box_open(&b);
    ad_dynamic_users *users = open_users(&b, 61184, 61186);
    uid_t seen[3];
    for (int i = 0; i < 3; i++) {
        char host[8];
        snprintf(host, sizeof(host), "h%d", i);
        seen[i] = get(users, host);
        for (int j = 0; j < i; j++)
            assert_int_not_equal(seen[i], seen[j]);
    }
    uid_t uid = 0;
    act_error err = {0};
    assert_int_equal(ad_dynamic_user_get(users, "h3", &uid, &err), -ENOSPC);
    assert_non_null(strstr(err.message, "host h3: no uid of DynamicUserRange=61184-61186"));
    assert_non_null(strstr(err.message, "widen DynamicUserRange= or set User="));
    ad_dynamic_users_free(users);

    /* Accounts of the box are never given out: uid 1 and 2 are daemon's
     * and bin's on Debian, 65534 is nobody's. */
    if (getpwuid(1) && getpwuid(2)) {
        users = open_users(&b, 1, 2);
        err = (act_error){0};
        assert_int_equal(ad_dynamic_user_get(users, "sys", &uid, &err), -ENOSPC);
        /* Nor when the databases are listed once instead of asked. */
        assert_int_equal(ad_dynamic_users_read_system(users, &err), 0);
        assert_int_equal(ad_dynamic_user_get(users, "sys", &uid, &err), -ENOSPC);
        ad_dynamic_users_free(users);
    }
    users = open_users(&b, 65534, 65535);
    assert_int_equal(ad_dynamic_user_get(users, "nobody2", &uid, &err), -ENOSPC);
    ad_dynamic_users_free(users);
    box_close(&b);
}

static void a_record_outside_a_new_range_is_replaced(void **state)
{
    (void)state;
    box b;
    box_open(&b);
    ad_dynamic_users *users = open_users(&b, 61184, 65519);
    uid_t old = get(users, "web1");
    ad_dynamic_users_free(users);
    users = open_users(&b, 200000, 299999);
    uid_t now = get(users, "web1");
    assert_true(now >= 200000 && now <= 299999);
    ad_dynamic_users_free(users);
    assert_false(recorded(&b, old, "web1"));
    assert_true(recorded(&b, now, "web1"));
    users = open_users(&b, 200000, 299999);
    assert_int_equal(get(users, "web1"), now);
    ad_dynamic_users_free(users);
    box_close(&b);
}

/* A uid a host names by number in User= or Group= is never given out, and
 * a dynamic uid has one owner that the daemon can name. */
static void numeric_accounts_of_hosts_are_never_given_out(void **state)
{
    (void)state;
    box b;
    box_open(&b);
    ad_dynamic_users *users = open_users(&b, 61300, 61301);
    cfg_host hosts[2] = {{.name = (char *)"a", .user = (char *)"61300"},
                         {.name = (char *)"b", .user = (char *)"web", .group = (char *)"61301"}};
    act_error err = {0};
    assert_int_equal(ad_dynamic_users_exclude_hosts(users, hosts, 2, &err), 0);
    uid_t uid = 0;
    assert_int_equal(ad_dynamic_user_get(users, "web1", &uid, &err), -ENOSPC);
    /* The next configuration names neither. */
    assert_int_equal(ad_dynamic_users_exclude_hosts(users, hosts, 0, &err), 0);
    uid = get(users, "web1");
    assert_string_equal(ad_dynamic_users_owner(users, uid), "web1");
    assert_null(ad_dynamic_users_owner(users, uid == 61300 ? 61301 : 61300));
    ad_dynamic_users_free(users);
    box_close(&b);
}

static void bad_records_are_refused_by_path(void **state)
{
    (void)state;
    box b;
    box_open(&b);
    assert_int_equal(mkdirat(b.fd, "dynamic-users", 0700), 0);
    /* Any file but the records, a link "<uid> -> <host>" too: it may stand
     * for a uid that must not be given to another host. */
    const char *bad[][2] = {{"notanumber", "web1"}, {"61200", "../etc"}, {"61200", "web1"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char link[64];
        snprintf(link, sizeof(link), "dynamic-users/%s", bad[i][0]);
        assert_int_equal(symlinkat(bad[i][1], b.fd, link), 0);
        ad_dynamic_users *users = NULL;
        act_error err = {0};
        assert_true(ad_dynamic_users_open(b.fd, 61184, 65519, &users, &err) < 0);
        assert_null(users);
        assert_non_null(strstr(err.message, link));
        assert_non_null(strstr(err.message, "remove it"));
        assert_int_equal(unlinkat(b.fd, link, 0), 0);
    }
    /* Lines of the records file, by line number. */
    const char *bad_lines[][2] = {{"# comment\n61200 web1\n61201\n", "line 3"},
                                  {"61200 ../etc\n", "line 1"},
                                  {"\n0 web1\n", "line 2"},
                                  {"61200 web1\n61201  web2\n", "line 2"},
                                  {"x61200 web1\n", "line 1"}};
    for (size_t i = 0; i < sizeof(bad_lines) / sizeof(bad_lines[0]); i++) {
        write_records(&b, bad_lines[i][0]);
        ad_dynamic_users *users = NULL;
        act_error err = {0};
        assert_int_equal(ad_dynamic_users_open(b.fd, 61184, 65519, &users, &err), -EINVAL);
        assert_null(users);
        char where[64];
        snprintf(where, sizeof(where), "dynamic-users/records %s", bad_lines[i][1]);
        assert_non_null(strstr(err.message, where));
        assert_non_null(strstr(err.message, "fix or remove the line"));
    }
    /* One host recorded twice. */
    const char *twice[] = {"61200 web1\n61202 web1\n", "61202 web2\n61203 web2\n"};
    ad_dynamic_users *users = NULL;
    act_error err = {0};
    for (size_t i = 0; i < 2; i++) {
        write_records(&b, twice[i]);
        err = (act_error){0};
        assert_int_equal(ad_dynamic_users_open(b.fd, 61184, 65519, &users, &err), -EEXIST);
        assert_non_null(strstr(err.message, "has a uid recorded twice"));
        assert_non_null(strstr(err.message, "remove the record that is not the owner"));
    }
    /* One uid given to two hosts. */
    write_records(&b, "61200 web1\n61200 web2\n");
    err = (act_error){0};
    assert_int_equal(ad_dynamic_users_open(b.fd, 61184, 65519, &users, &err), -EEXIST);
    assert_non_null(strstr(err.message, "uid 61200 is recorded for host"));
    box_close(&b);
}

/* A start lists the databases once and fsyncs the records once: the uids
 * are the same as asked one by one, and every record is there. */
static void a_start_lists_accounts_once_and_syncs_records_once(void **state)
{
    (void)state;
    box one, two;
    box_open(&one);
    box_open(&two);
    ad_dynamic_users *asked = open_users(&one, 200000, 200099);
    ad_dynamic_users *listed = open_users(&two, 200000, 200099);
    act_error err = {0};
    assert_int_equal(ad_dynamic_users_read_system(listed, &err), 0);
    ad_dynamic_users_defer_sync(listed);
    for (int i = 0; i < 50; i++) {
        char host[8];
        snprintf(host, sizeof(host), "h%d", i);
        uid_t uid = get(listed, host);
        assert_int_equal(uid, get(asked, host));
        assert_true(recorded(&one, uid, host));
        /* Written once, at the sync. */
        assert_int_equal(faccessat(two.fd, "dynamic-users/records", F_OK, 0), -1);
    }
    assert_int_equal(ad_dynamic_users_sync(listed, &err), 0);
    for (int i = 0; i < 50; i++) {
        char host[8];
        snprintf(host, sizeof(host), "h%d", i);
        assert_true(recorded(&two, get(asked, host), host));
    }
    assert_int_equal(ad_dynamic_users_sync(listed, &err), 0);
    ad_dynamic_users_free(asked);
    ad_dynamic_users_free(listed);
    box_close(&one);
    box_close(&two);
}

/* Only sources that list all they know let a listing stand for lookups. */
static void nsswitch_names_whether_a_listing_is_whole(void **state)
{
    (void)state;
    assert_true(ad_nsswitch_lists_whole(""));
    assert_true(ad_nsswitch_lists_whole("passwd: files systemd\ngroup: files systemd\n"));
    assert_true(ad_nsswitch_lists_whole("# passwd: ldap\npasswd:\tfiles [NOTFOUND=return] "
                                        "systemd # ldap\nhosts: files dns ldap\n"));
    assert_true(ad_nsswitch_lists_whole("passwd_compat: nis\npasswd: files extrausers\n"));
    assert_false(ad_nsswitch_lists_whole("passwd: files ldap\ngroup: files\n"));
    assert_false(ad_nsswitch_lists_whole("passwd: files\ngroup: files sss\n"));
    assert_false(ad_nsswitch_lists_whole("  group : compat\n"));
    assert_false(ad_nsswitch_lists_whole("passwd: files [NOTFOUND=return"));
}

/* A listing knows root, and a uid only a lookup finds counts when a source
 * that does not list (here every one, by the file) is named. */
static void a_listing_knows_the_accounts(void **state)
{
    (void)state;
    ad_system_ids *ids = NULL;
    act_error err = {0};
    assert_int_equal(ad_system_ids_read("/nonexistent/nsswitch.conf", &ids, &err), 0);
    assert_true(ad_system_ids_known(ids, 0));
    assert_false(ad_system_ids_known(ids, 4000000000u));
    ad_system_ids_free(ids);
    char path[] = "/tmp/act-nsswitch-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char text[] = "passwd: files ldap\ngroup: files ldap\n";
    assert_int_equal(write(fd, text, sizeof(text) - 1), (ssize_t)sizeof(text) - 1);
    close(fd);
    assert_int_equal(ad_system_ids_read(path, &ids, &err), 0);
    assert_true(ad_system_ids_known(ids, 0));
    assert_false(ad_system_ids_known(ids, 4000000000u)); /* looked up: nobody has it */
    ad_system_ids_free(ids);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_uid_on_every_box_and_after_a_restart),
        cmocka_unit_test(collisions_probe_on_and_a_full_range_is_refused),
        cmocka_unit_test(a_record_outside_a_new_range_is_replaced),
        cmocka_unit_test(numeric_accounts_of_hosts_are_never_given_out),
        cmocka_unit_test(bad_records_are_refused_by_path),
        cmocka_unit_test(a_start_lists_accounts_once_and_syncs_records_once),
        cmocka_unit_test(nsswitch_names_whether_a_listing_is_whole),
        cmocka_unit_test(a_listing_knows_the_accounts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
