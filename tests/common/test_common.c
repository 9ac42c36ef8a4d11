/* Unit tests of common/: name rules, errors, atomic file writes, cleanup. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/cleanup.h"
#include "common/error.h"
#include "common/fileio.h"
#include "common/names.h"
#include "common/paths.h"
#include "common/text.h"

static void names_accepts_the_allowed_alphabet(void **state)
{
    (void)state;
    assert_true(act_name_is_valid("web1"));
    assert_true(act_name_is_valid("v1.2.3-rc_4"));
    assert_true(act_name_is_valid("a"));
    char longest[ACT_NAME_MAX + 1];
    memset(longest, 'x', ACT_NAME_MAX);
    longest[ACT_NAME_MAX] = '\0';
    assert_true(act_name_is_valid(longest));
}

static void names_refuses_traversal_and_junk(void **state)
{
    (void)state;
    const char *bad[] = {"", ".", "..", ".hidden", "a/b", "../etc", "a b", "tab\t", "caf\xc3\xa9",
                         "x\n"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        act_error err = {0};
        assert_false(act_name_is_valid(bad[i]));
        assert_int_equal(act_name_check("host", bad[i], &err), -EINVAL);
        assert_non_null(strstr(err.message, "host name"));
    }
    assert_false(act_name_is_valid(NULL));
    char too_long[ACT_NAME_MAX + 2];
    memset(too_long, 'x', ACT_NAME_MAX + 1);
    too_long[ACT_NAME_MAX + 1] = '\0';
    act_error err = {0};
    assert_int_equal(act_name_check("version", too_long, &err), -EINVAL);
    assert_non_null(strstr(err.message, "longer than 64"));
}

static void names_error_escapes_control_bytes(void **state)
{
    (void)state;
    act_error err = {0};
    act_name_check("host", "a\nb", &err);
    assert_null(strchr(err.message, '\n'));
    assert_non_null(strstr(err.message, "\\x0a"));
}

static void error_prefix_keeps_errno(void **state)
{
    (void)state;
    act_error err = {0};
    assert_int_equal(act_error_set(&err, ENOENT, "release %s: not staged", "v1"), -ENOENT);
    assert_int_equal(act_error_prefix(&err, "host %s", "web1"), -ENOENT);
    assert_string_equal(err.message, "host web1: release v1: not staged");
    assert_int_equal(act_error_set(NULL, EPERM, "no sink"), -EPERM);
}

/* Makes a fresh directory from template, which it rewrites, and opens it. */
static int open_fresh_dir(char *template)
{
    assert_non_null(mkdtemp(template));
    int dirfd = open(template, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(dirfd >= 0);
    return dirfd;
}

static void fileio_atomic_write_replaces_and_reads_back(void **state)
{
    (void)state;
    char dir[] = "/tmp/act-common-XXXXXX";
    _cleanup_close_ int dirfd = open_fresh_dir(dir);
    act_error err = {0};

    assert_int_equal(act_write_atomic(dirfd, "claim.json", "one", 3, 0640, &err), 0);
    assert_int_equal(act_write_atomic(dirfd, "claim.json", "second", 6, 0640, &err), 0);
    /* The variant without fsyncs replaces the same way, and leaves no
     * temporary file either (the rmdir below). */
    assert_int_equal(act_write_replace(dirfd, "record.json", "first", 5, 0640, &err), 0);
    assert_int_equal(act_write_replace(dirfd, "record.json", "next", 4, 0640, &err), 0);
    _cleanup_free_ char *record = NULL;
    assert_int_equal(act_read_file(dirfd, "record.json", 100, &record, NULL, &err), 0);
    assert_string_equal(record, "next");
    assert_int_equal(unlinkat(dirfd, "record.json", 0), 0);
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    assert_int_equal(act_read_file(dirfd, "claim.json", 100, &text, &len, &err), 0);
    assert_string_equal(text, "second");
    assert_int_equal(len, 6);

    struct stat st;
    assert_int_equal(fstatat(dirfd, "claim.json", &st, 0), 0);
    assert_int_equal(st.st_mode & 07777, 0640);

    /* A file over the limit is refused, not truncated. */
    _cleanup_free_ char *big = NULL;
    assert_int_equal(act_read_file(dirfd, "claim.json", 5, &big, NULL, &err), -EFBIG);
    assert_null(big);
    assert_non_null(strstr(err.message, "larger than 5 bytes"));

    assert_int_equal(act_read_file(dirfd, "absent.json", 5, &big, NULL, &err), -ENOENT);

    assert_int_equal(unlinkat(dirfd, "claim.json", 0), 0);
    assert_int_equal(rmdir(dir), 0); /* no temp file left behind */
}

/* A file of size bytes with every block written (not sparse). */
static void write_whole_file(int dirfd, const char *name, size_t size)
{
    _cleanup_close_ int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
    assert_true(fd >= 0);
    static char block[1 << 16];
    memset(block, 'b', sizeof(block));
    for (size_t done = 0; done < size; done += sizeof(block))
        assert_int_equal(write(fd, block, sizeof(block)), sizeof(block));
}

static void fileio_unlink_gently_cuts_down_only_a_large_file_of_its_own(void **state)
{
    (void)state;
    char dir[] = "/tmp/act-common-XXXXXX";
    _cleanup_close_ int dirfd = open_fresh_dir(dir);
    const size_t large = 5 * (size_t)ACT_UNLINK_CHUNK_BYTES;

    /* A large file is cut down before it goes: a reader that still holds it
     * open sees at most one chunk left (its blocks went a chunk a time). */
    write_whole_file(dirfd, "large", large);
    _cleanup_close_ int held = openat(dirfd, "large", O_RDONLY | O_CLOEXEC);
    assert_true(held >= 0);
    assert_int_equal(act_unlink_gently(dirfd, "large"), 0);
    struct stat st;
    assert_int_equal(fstat(held, &st), 0);
    assert_true(st.st_size > 0 && st.st_size <= (off_t)ACT_UNLINK_CHUNK_BYTES);
    assert_int_equal(faccessat(dirfd, "large", F_OK, AT_SYMLINK_NOFOLLOW), -1);

    /* One with a second name is only unlinked: the other name keeps it whole. */
    write_whole_file(dirfd, "shared", large);
    assert_int_equal(linkat(dirfd, "shared", dirfd, "shared-too", 0), 0);
    assert_int_equal(act_unlink_gently(dirfd, "shared"), 0);
    assert_int_equal(fstatat(dirfd, "shared-too", &st, 0), 0);
    assert_int_equal(st.st_size, (off_t)large);

    /* A symlink is unlinked, never followed. */
    assert_int_equal(symlinkat("shared-too", dirfd, "link"), 0);
    assert_int_equal(act_unlink_gently(dirfd, "link"), 0);
    assert_int_equal(fstatat(dirfd, "shared-too", &st, 0), 0);
    assert_int_equal(st.st_size, (off_t)large);
    assert_int_equal(unlinkat(dirfd, "shared-too", 0), 0);

    /* A FIFO is not opened (that would block with no reader), a small file
     * goes at once, and what unlinkat refuses is refused the same way. */
    assert_int_equal(mkfifoat(dirfd, "fifo", 0600), 0);
    assert_int_equal(act_unlink_gently(dirfd, "fifo"), 0);
    write_whole_file(dirfd, "small", 1 << 16);
    assert_int_equal(act_unlink_gently(dirfd, "small"), 0);
    errno = 0;
    assert_int_equal(act_unlink_gently(dirfd, "absent"), -1);
    assert_int_equal(errno, ENOENT);
    assert_int_equal(mkdirat(dirfd, "sub", 0700), 0);
    errno = 0;
    assert_int_equal(act_unlink_gently(dirfd, "sub"), -1);
    assert_int_equal(errno, EISDIR);
    assert_int_equal(unlinkat(dirfd, "sub", AT_REMOVEDIR), 0);
    assert_int_equal(rmdir(dir), 0);
}

static void fileio_mkdir_p_creates_nested(void **state)
{
    (void)state;
    char dir[] = "/tmp/act-common-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char nested[256];
    snprintf(nested, sizeof(nested), "%s/a/b/c", dir);
    act_error err = {0};
    assert_int_equal(act_mkdir_p(nested, 0755, &err), 0);
    assert_int_equal(act_mkdir_p(nested, 0755, &err), 0);
    struct stat st;
    assert_int_equal(stat(nested, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    char path[300];
    snprintf(path, sizeof(path), "%s/a/b/c", dir);
    rmdir(path);
    snprintf(path, sizeof(path), "%s/a/b", dir);
    rmdir(path);
    snprintf(path, sizeof(path), "%s/a", dir);
    rmdir(path);
    assert_int_equal(rmdir(dir), 0);
}

static size_t count_entries(DIR *dir)
{
    size_t n = 0;
    for (struct dirent *de; (de = readdir(dir));)
        n += de->d_name[0] != '.';
    return n;
}

static void opendir_at_reads_afresh_and_refuses_symlinks(void **state)
{
    (void)state;
    char dir[] = "/tmp/act-common-XXXXXX";
    _cleanup_close_ int dirfd = open_fresh_dir(dir);
    assert_int_equal(mkdirat(dirfd, "sub", 0755), 0);
    assert_int_equal(symlinkat("sub", dirfd, "link"), 0);

    /* Each DIR has its own offset: reading one to the end leaves the next
     * one whole. */
    for (int pass = 0; pass < 2; pass++) {
        _cleanup_(closedirp) DIR *listing = act_opendir_at(dirfd, ".");
        assert_non_null(listing);
        assert_int_equal(count_entries(listing), 2);
    }
    _cleanup_(closedirp) DIR *sub = act_opendir_at(dirfd, "sub");
    assert_non_null(sub);
    assert_int_equal(count_entries(sub), 0);
    /* O_DIRECTORY with O_NOFOLLOW: the kernel says ENOTDIR for a symlink. */
    errno = 0;
    assert_null(act_opendir_at(dirfd, "link"));
    assert_true(errno == ENOTDIR || errno == ELOOP);

    assert_int_equal(unlinkat(dirfd, "link", 0), 0);
    assert_int_equal(unlinkat(dirfd, "sub", AT_REMOVEDIR), 0);
    assert_int_equal(rmdir(dir), 0);
}

static void copy_string_cuts_short_and_says_so(void **state)
{
    (void)state;
    char small[6];
    assert_true(act_copy_string(small, sizeof(small), "hello"));
    assert_string_equal(small, "hello");
    assert_false(act_copy_string(small, sizeof(small), "hello world"));
    assert_string_equal(small, "hello");
    assert_false(act_copy_string(small, 0, "x"));
}

static void text_show_escapes_and_cuts_short(void **state)
{
    (void)state;
    char shown[ACT_TEXT_SHOW_MAX];
    assert_string_equal(act_text_show("plain text", shown, sizeof(shown)), "plain text");
    assert_string_equal(act_text_show("a\nb\x1b[31m\xff", shown, sizeof(shown)),
                        "a\\x0ab\\x1b[31m\\xff");
    char long_text[200];
    memset(long_text, '\x01', sizeof(long_text) - 1);
    long_text[sizeof(long_text) - 1] = '\0';
    act_text_show(long_text, shown, sizeof(shown));
    assert_true(strlen(shown) < sizeof(shown));
    assert_non_null(strstr(shown, "..."));
    for (const char *p = shown; *p; p++)
        assert_true(*p >= 0x20 && *p < 0x7f);
    char tiny[6];
    act_text_show("abcdefgh", tiny, sizeof(tiny));
    assert_true(strlen(tiny) < sizeof(tiny));
}

static void text_escape_keeps_all_of_the_text(void **state)
{
    (void)state;
    char long_text[300];
    memset(long_text, 'x', sizeof(long_text) - 1);
    long_text[sizeof(long_text) - 1] = '\0';
    long_text[150] = '\t';
    _cleanup_free_ char *escaped = act_text_escape(long_text);
    assert_non_null(escaped);
    assert_int_equal(strlen(escaped), sizeof(long_text) - 1 + 3);
    assert_non_null(strstr(escaped, "x\\x09x"));
    _cleanup_free_ char *empty = act_text_escape("");
    assert_string_equal(empty, "");
}

typedef struct counted {
    int *frees;
} counted;

static void counted_free(counted *c)
{
    (*c->frees)++;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(counted *, counted_free)

static void trivial_cleanup_frees_once_and_skips_null(void **state)
{
    (void)state;
    int frees = 0;
    counted item = {.frees = &frees};
    {
        _cleanup_(counted_freep) counted *held = &item;
        _cleanup_(counted_freep) counted *empty = NULL;
        _cleanup_(counted_freep) counted *handed_on = &item;
        assert_ptr_equal(TAKE_PTR(handed_on), &item);
        (void)held;
        (void)empty;
    }
    assert_int_equal(frees, 1);
}

/* oci:PATH[:TAG]: the last ':' starts the tag only when no '/' follows. */
static void image_layout_path_ends_before_its_tag(void **state)
{
    (void)state;
    assert_int_equal(act_image_layout_path_len("img:v1"), 3);
    assert_int_equal(act_image_layout_path_len("/srv/img"), 8);
    assert_int_equal(act_image_layout_path_len("/srv/a:b/img"), 12);
    assert_int_equal(act_image_layout_path_len("/srv/a:b/img:v2"), 12);
    assert_int_equal(act_image_layout_path_len(":v1"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(names_accepts_the_allowed_alphabet),
        cmocka_unit_test(names_refuses_traversal_and_junk),
        cmocka_unit_test(names_error_escapes_control_bytes),
        cmocka_unit_test(error_prefix_keeps_errno),
        cmocka_unit_test(fileio_atomic_write_replaces_and_reads_back),
        cmocka_unit_test(fileio_unlink_gently_cuts_down_only_a_large_file_of_its_own),
        cmocka_unit_test(fileio_mkdir_p_creates_nested),
        cmocka_unit_test(opendir_at_reads_afresh_and_refuses_symlinks),
        cmocka_unit_test(copy_string_cuts_short_and_says_so),
        cmocka_unit_test(text_show_escapes_and_cuts_short),
        cmocka_unit_test(text_escape_keeps_all_of_the_text),
        cmocka_unit_test(trivial_cleanup_frees_once_and_skips_null),
        cmocka_unit_test(image_layout_path_ends_before_its_tag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
