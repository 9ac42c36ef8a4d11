/* checkpoint/ with real files: a round trip of a tree with files,
 * directories, symlinks, modes and an empty directory; a tampered archive
 * refused with nothing changed; archives naming "../x" or an absolute path
 * refused; pruning keeps the newest and the protected one. With a real
 * registry (docker-registry) as Checkpoints=docker://: the round trip
 * pushed in chunks and fetched back by digest, listing, a blob changed in
 * the registry's storage refused with nothing changed, pruning by
 * deletion, and a registry that does not allow deletion saying so. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <cmocka.h>
#include <openssl/evp.h>

#include "checkpoint/checkpoint.h"
#include "tests/image/registry_harness.h"

typedef struct fixture {
    char tmp[64];
    char store[256]; /* the checkpoint directory */
    char state[256]; /* <tmp>/host/state */
} fixture;

static void write_file(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
}

static char *read_text(const char *path)
{
    static char buf[4096];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    buf[n < 0 ? 0 : n] = '\0';
    return buf;
}

static int setup(void **state)
{
    fixture *fx = calloc(1, sizeof(*fx));
    snprintf(fx->tmp, sizeof(fx->tmp), "/tmp/ckpt-test-XXXXXX");
    assert_non_null(mkdtemp(fx->tmp));
    snprintf(fx->store, sizeof(fx->store), "%s/checkpoints", fx->tmp);
    assert_int_equal(mkdir(fx->store, 0700), 0);
    char host[160];
    snprintf(host, sizeof(host), "%s/host", fx->tmp);
    assert_int_equal(mkdir(host, 0755), 0);
    snprintf(fx->state, sizeof(fx->state), "%s/state", host);
    assert_int_equal(mkdir(fx->state, 0750), 0);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture *fx = *state;
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", fx->tmp);
    assert_int_equal(system(cmd), 0);
    free(fx);
    return 0;
}

static char *join(const fixture *fx, const char *rel)
{
    static char path[512];
    snprintf(path, sizeof(path), "%s/%s", fx->state, rel);
    return path;
}

/* The tree the round trip carries. */
static void make_tree(fixture *fx)
{
    write_file(join(fx, "counter"), "41\n", 0600);
    assert_int_equal(mkdir(join(fx, "data"), 0755), 0);
    write_file(join(fx, "data/notes.txt"), "hello\n", 0644);
    write_file(join(fx, "data/run.sh"), "#!/bin/sh\n", 0750);
    assert_int_equal(mkdir(join(fx, "empty"), 0700), 0);
    assert_int_equal(symlink("data/notes.txt", join(fx, "link")), 0);
    assert_int_equal(symlink("/etc/hostname", join(fx, "outside")), 0);
}

static mode_t mode_of(const char *path)
{
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    return st.st_mode;
}

static void round_trip_keeps_files_dirs_symlinks_and_modes(void **state)
{
    fixture *fx = *state;
    make_tree(fx);
    act_error err = {0};
    ckpt_info info;
    if (ckpt_write(fx->store, "web1", fx->state, 7, "box-1", NULL, &info, &err) < 0)
        fail_msg("write: %s", err.message);
    assert_int_equal(strlen(info.sha256), 64);
    assert_true(info.size > 0);
    assert_int_equal(info.generation, 7);
    assert_string_equal(info.box, "box-1");

    /* Wipe the state and change it: the restore brings back exactly the tree. */
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "rm -rf %s/* && echo junk > %s/junk", fx->state, fx->state);
    assert_int_equal(system(cmd), 0);
    if (ckpt_restore(fx->store, "web1", info.id, info.sha256, fx->state, 1234, 5678, &err) < 0)
        fail_msg("restore: %s", err.message);

    assert_string_equal(read_text(join(fx, "counter")), "41\n");
    assert_string_equal(read_text(join(fx, "data/notes.txt")), "hello\n");
    assert_int_equal(mode_of(join(fx, "counter")) & 07777, 0600);
    assert_int_equal(mode_of(join(fx, "data/run.sh")) & 07777, 0750);
    assert_int_equal(mode_of(join(fx, "data")) & 07777, 0755);
    assert_true(S_ISDIR(mode_of(join(fx, "empty"))));
    assert_int_equal(mode_of(join(fx, "empty")) & 07777, 0700);
    assert_true(S_ISLNK(mode_of(join(fx, "link"))));
    char target[256] = "";
    assert_true(readlink(join(fx, "outside"), target, sizeof(target) - 1) > 0);
    assert_string_equal(target, "/etc/hostname");
    assert_null(read_text(join(fx, "junk")));
    assert_int_equal(mode_of(fx->state) & 07777, 0750);
    if (geteuid() == 0) {
        struct stat st;
        assert_int_equal(lstat(join(fx, "data/notes.txt"), &st), 0);
        assert_int_equal(st.st_uid, 1234);
        assert_int_equal(st.st_gid, 5678);
        assert_int_equal(lstat(fx->state, &st), 0);
        assert_int_equal(st.st_uid, 1234);
    }
    /* No hidden sibling is left beside the state directory. */
    snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A %s/host | grep -v '^state$')\"", fx->tmp);
    assert_int_equal(system(cmd), 0);

    ckpt_info *items = NULL;
    size_t n = 0;
    assert_int_equal(ckpt_list(fx->store, "web1", &items, &n, &err), 0);
    assert_int_equal(n, 1);
    assert_string_equal(items[0].id, info.id);
    assert_string_equal(items[0].sha256, info.sha256);
    assert_int_equal(items[0].size, info.size);
    assert_int_equal(items[0].generation, 7);
    free(items);
}

static void tampered_archive_is_refused_and_nothing_changes(void **state)
{
    fixture *fx = *state;
    make_tree(fx);
    act_error err = {0};
    ckpt_info info;
    assert_int_equal(ckpt_write(fx->store, "web1", fx->state, 1, "box-1", NULL, &info, &err), 0);
    write_file(join(fx, "counter"), "99\n", 0600);

    char path[512];
    snprintf(path, sizeof(path), "%s/web1/%s.tar.zst", fx->store, info.id);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "X", 1, 20), 1);
    close(fd);
    assert_int_equal(ckpt_restore(fx->store, "web1", info.id, info.sha256, fx->state, 0, 0, &err),
                     -EBADMSG);
    assert_non_null(strstr(err.message, "changed or damaged"));
    assert_string_equal(read_text(join(fx, "counter")), "99\n");

    /* A missing archive says so, and changes nothing either. */
    err = (act_error){0};
    assert_int_equal(ckpt_restore(fx->store, "web1", "20990101T000000.000000Z-00000000",
                                  info.sha256, fx->state, 0, 0, &err),
                     -ENOENT);
    assert_non_null(strstr(err.message, "missing"));
    assert_string_equal(read_text(join(fx, "counter")), "99\n");

    /* Names from outside are checked before any path is made of them. */
    assert_int_equal(
        ckpt_restore(fx->store, "../web1", info.id, info.sha256, fx->state, 0, 0, &err), -EINVAL);
    assert_int_equal(
        ckpt_restore(fx->store, "web1", "../../etc", info.sha256, fx->state, 0, 0, &err), -EINVAL);
    assert_string_equal(read_text(join(fx, "counter")), "99\n");
}

static void sha256_file(const char *path, char out[65])
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    static unsigned char buf[1 << 20];
    ssize_t n = read(fd, buf, sizeof(buf));
    close(fd);
    unsigned char md[32];
    unsigned int len = 0;
    assert_int_equal(EVP_Digest(buf, (size_t)n, md, &len, EVP_sha256(), NULL), 1);
    for (unsigned i = 0; i < len; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* An archive as a hostile writer makes it: one entry named name. */
static void write_hostile(const fixture *fx, const char *id, const char *name, mode_t type,
                          char sha[65])
{
    char dir[1024], path[1100];
    snprintf(dir, sizeof(dir), "%s/web1", fx->store);
    mkdir(dir, 0700);
    snprintf(path, sizeof(path), "%s/%s.tar.zst", dir, id);
    struct archive *a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    archive_write_add_filter_zstd(a);
    assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, name);
    archive_entry_set_filetype(e, type);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, type == AE_IFREG ? 4 : 0);
    if (type == AE_IFCHR)
        archive_entry_set_rdev(e, makedev(1, 3));
    assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
    if (type == AE_IFREG)
        assert_int_equal(archive_write_data(a, "pwn\n", 4), 4);
    archive_entry_free(e);
    archive_write_close(a);
    archive_write_free(a);
    sha256_file(path, sha);
}

static void hostile_entries_are_refused(void **state)
{
    fixture *fx = *state;
    write_file(join(fx, "counter"), "5\n", 0600);
    static const struct {
        const char *name;
        mode_t type;
        const char *why;
    } cases[] = {
        {"../x", AE_IFREG, "\"..\""},
        {"a/../../x", AE_IFREG, "\"..\""},
        {"/tmp/ckpt-pwned", AE_IFREG, "absolute"},
        {"null", AE_IFCHR, "not a file"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char id[64], sha[65];
        snprintf(id, sizeof(id), "20260101T00000%zu.000000Z-00000000", i);
        write_hostile(fx, id, cases[i].name, cases[i].type, sha);
        act_error err = {0};
        assert_int_equal(ckpt_restore(fx->store, "web1", id, sha, fx->state, 0, 0, &err), -EINVAL);
        if (!strstr(err.message, cases[i].why))
            fail_msg("%s: %s", cases[i].name, err.message);
        assert_string_equal(read_text(join(fx, "counter")), "5\n");
    }
    assert_int_equal(access("/tmp/ckpt-pwned", F_OK), -1);
    char x[1024];
    snprintf(x, sizeof(x), "%s/host/x", fx->tmp);
    assert_int_equal(access(x, F_OK), -1);
}

/* A symlink in the archive, then a file through it: libarchive's secure
 * symlink check refuses the second entry. */
static void symlink_escape_is_refused(void **state)
{
    fixture *fx = *state;
    write_file(join(fx, "counter"), "5\n", 0600);
    char escape[1024];
    snprintf(escape, sizeof(escape), "%s/escape", fx->tmp);
    assert_int_equal(mkdir(escape, 0755), 0);
    char dir[1024], path[1100];
    snprintf(dir, sizeof(dir), "%s/web1", fx->store);
    mkdir(dir, 0700);
    const char *id = "20260101T000000.000000Z-11111111";
    snprintf(path, sizeof(path), "%s/%s.tar.zst", dir, id);
    struct archive *a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    archive_write_add_filter_zstd(a);
    assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, "door");
    archive_entry_set_filetype(e, AE_IFLNK);
    archive_entry_set_perm(e, 0777);
    archive_entry_set_symlink(e, escape);
    assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
    archive_entry_clear(e);
    archive_entry_set_pathname(e, "door/pwned");
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, 4);
    assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
    assert_int_equal(archive_write_data(a, "pwn\n", 4), 4);
    archive_entry_free(e);
    archive_write_close(a);
    archive_write_free(a);
    char sha[65];
    sha256_file(path, sha);
    act_error err = {0};
    assert_true(ckpt_restore(fx->store, "web1", id, sha, fx->state, 0, 0, &err) < 0);
    char pwned[1100];
    snprintf(pwned, sizeof(pwned), "%s/pwned", escape);
    assert_int_equal(access(pwned, F_OK), -1);
    assert_string_equal(read_text(join(fx, "counter")), "5\n");
}

static void prune_keeps_the_newest_and_the_protected(void **state)
{
    fixture *fx = *state;
    write_file(join(fx, "counter"), "1\n", 0600);
    ckpt_info written[5];
    act_error err = {0};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(ckpt_write(fx->store, "web1", fx->state, (uint64_t)i + 1, "box-1", NULL,
                                    &written[i], &err),
                         0);
        usleep(2000);
    }
    const char *protected[] = {written[0].id};
    assert_int_equal(ckpt_prune(fx->store, "web1", 2, protected, 1, &err), 2);
    ckpt_info *items = NULL;
    size_t n = 0;
    assert_int_equal(ckpt_list(fx->store, "web1", &items, &n, &err), 0);
    assert_int_equal(n, 3);
    assert_string_equal(items[0].id, written[4].id);
    assert_string_equal(items[1].id, written[3].id);
    assert_string_equal(items[2].id, written[0].id);
    free(items);
    /* Nothing more to remove; a host with no checkpoints lists none. */
    assert_int_equal(ckpt_prune(fx->store, "web1", 2, protected, 1, &err), 0);
    assert_int_equal(ckpt_list(fx->store, "web2", &items, &n, &err), 0);
    assert_int_equal(n, 0);
    assert_int_equal(ckpt_list(fx->store, "../web1", &items, &n, &err), -EINVAL);
}

static void cancelled_write_leaves_nothing(void **state)
{
    fixture *fx = *state;
    make_tree(fx);
    atomic_bool cancel = true;
    act_error err = {0};
    ckpt_info info;
    assert_int_equal(ckpt_write(fx->store, "web1", fx->state, 1, "box-1", &cancel, &info, &err),
                     -ECANCELED);
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A %s/web1)\"", fx->store);
    assert_int_equal(system(cmd), 0);
}

static void urls_and_ids_are_checked(void **state)
{
    char *dir = NULL;
    act_error err = {0};
    assert_int_equal(ckpt_parse_url("dir:///srv/checkpoints/", &dir, &err), 0);
    assert_string_equal(dir, "/srv/checkpoints");
    free(dir);
    assert_int_equal(ckpt_parse_url("nfs://x/y", &dir, &err), -EINVAL);
    assert_non_null(strstr(err.message, "dir:///PATH"));
    assert_int_equal(ckpt_parse_url("dir://relative", &dir, &err), -EINVAL);
    assert_int_equal(ckpt_parse_url("dir:///a/../b", &dir, &err), -EINVAL);
    assert_int_equal(ckpt_check_id("..", &err), -EINVAL);
    assert_int_equal(ckpt_check_id("a/b", &err), -EINVAL);
    assert_int_equal(ckpt_check_id("20261201T000000.000000Z-abcdef01", &err), 0);
    ckpt_place place;
    assert_int_equal(ckpt_place_parse("docker://registry.lab:5000/team/ckpt/", &place, &err), 0);
    assert_string_equal(place.namespace, "docker://registry.lab:5000/team/ckpt");
    assert_null(place.dir);
    ckpt_place_clear(&place);
    const char *bad[] = {"docker://registry.lab", "docker://registry.lab/ckpt:v1",
                         "docker://registry.lab/ckpt@sha256:00", "docker://registry.lab/Ckpt"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(ckpt_place_parse(bad[i], &place, &err), -EINVAL);
        assert_non_null(strstr(err.message, "checkpoint namespace"));
    }
}

static reg_harness registry;

static void place_in_registry(fixture *fx, ckpt_place *place)
{
    char url[200], spool[300];
    snprintf(url, sizeof(url), "docker://%s/checkpoints", registry.address);
    snprintf(spool, sizeof(spool), "%s/spool", fx->tmp);
    act_error err = {0};
    char *insecure[] = {registry.address, NULL};
    assert_int_equal(ckpt_place_parse(url, place, &err), 0);
    assert_int_equal(ckpt_place_set_registry(place, spool, NULL, insecure, &err), 0);
    place->chunk_bytes = 64; /* the archives are small: several PATCHes each */
}

static void checkpoints_travel_through_a_registry(void **state)
{
    fixture *fx = *state;
    if (!reg_harness_available())
        skip(); /* scripts/install-deps.sh installs docker-registry */
    act_error err = {0};
    if (reg_harness_start(&registry, false, false, &err) < 0)
        fail_msg("registry: %s", err.message);
    ckpt_place place;
    place_in_registry(fx, &place);
    make_tree(fx);
    ckpt_info first, second;
    if (ckpt_place_write(&place, "web1", fx->state, 7, "box-1", NULL, &first, &err) < 0)
        fail_msg("write: %s", err.message);
    write_file(join(fx, "counter"), "42\n", 0600);
    if (ckpt_place_write(&place, "web1", fx->state, 8, "box-1", NULL, &second, &err) < 0)
        fail_msg("write: %s", err.message);
    /* Nothing stays in the spool. */
    char spooled[300];
    snprintf(spooled, sizeof(spooled), "%s/spool/web1", fx->tmp);
    DIR *dir = opendir(spooled);
    assert_non_null(dir);
    struct dirent *de;
    while ((de = readdir(dir)))
        assert_true(de->d_name[0] == '.');
    closedir(dir);

    ckpt_info *items = NULL;
    size_t n = 0;
    assert_int_equal(ckpt_place_list(&place, "web1", &items, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_string_equal(items[0].id, second.id);
    assert_string_equal(items[0].sha256, second.sha256);
    assert_int_equal(items[0].generation, 8);
    assert_string_equal(items[0].box, "box-1");
    assert_int_equal(items[1].size, first.size);
    free(items);

    /* The first one back, by its digest. */
    if (ckpt_place_restore(&place, "web1", first.id, first.sha256, fx->state, getuid(), getgid(),
                           &err) < 0)
        fail_msg("restore: %s", err.message);
    assert_string_equal(read_text(join(fx, "counter")), "41\n");
    assert_string_equal(read_text(join(fx, "data/notes.txt")), "hello\n");

    /* A blob changed in the registry's storage: refused, nothing changed. */
    char command[1024];
    snprintf(command, sizeof(command),
             "printf 'X' | dd of=%s/docker/registry/v2/blobs/sha256/%.2s/%s/data bs=1 seek=3 "
             "conv=notrunc 2>/dev/null",
             registry.storage, second.sha256, second.sha256);
    assert_int_equal(system(command), 0);
    assert_int_equal(ckpt_place_restore(&place, "web1", second.id, second.sha256, fx->state,
                                        getuid(), getgid(), &err),
                     -EBADMSG);
    assert_non_null(strstr(err.message, "changed or damaged"));
    assert_string_equal(read_text(join(fx, "counter")), "41\n");
    /* One the registry never had. */
    assert_int_equal(
        ckpt_place_restore(&place, "web1", "nope",
                           "0000000000000000000000000000000000000000000000000000000000000000",
                           fx->state, getuid(), getgid(), &err),
        -ENOENT);

    /* Pruning deletes what is neither among the newest nor protected. */
    const char *protected[] = {NULL};
    assert_int_equal(ckpt_place_prune(&place, "web1", 1, protected, 1, &err), 1);
    assert_int_equal(ckpt_place_list(&place, "web1", &items, &n, &err), 0);
    assert_int_equal(n, 1);
    assert_string_equal(items[0].id, second.id);
    free(items);
    ckpt_place_clear(&place);
    reg_harness_stop(&registry);

    /* A registry that does not allow deletion: the pruning says so. */
    if (reg_harness_start_with(&registry, false, false, false, &err) < 0)
        fail_msg("registry: %s", err.message);
    place_in_registry(fx, &place);
    for (int i = 0; i < 2; i++)
        if (ckpt_place_write(&place, "web1", fx->state, 9, "box-1", NULL, &first, &err) < 0)
            fail_msg("write: %s", err.message);
    assert_int_equal(ckpt_place_prune(&place, "web1", 1, protected, 1, &err), -EOPNOTSUPP);
    assert_non_null(strstr(err.message, "does not allow deletion"));
    ckpt_place_clear(&place);
    reg_harness_stop(&registry);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(round_trip_keeps_files_dirs_symlinks_and_modes, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(tampered_archive_is_refused_and_nothing_changes, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(hostile_entries_are_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(symlink_escape_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(prune_keeps_the_newest_and_the_protected, setup, teardown),
        cmocka_unit_test_setup_teardown(cancelled_write_leaves_nothing, setup, teardown),
        cmocka_unit_test(urls_and_ids_are_checked),
        cmocka_unit_test_setup_teardown(checkpoints_travel_through_a_registry, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
