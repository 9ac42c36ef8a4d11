#include "tests/release/helpers.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "common/cleanup.h"

const char *rt_app_v1;
const char *rt_app_v2;

void rt_parse_args(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s APP_V1 APP_V2 (meson passes the test app builds)\n", argv[0]);
        exit(1);
    }
    rt_app_v1 = argv[1];
    rt_app_v2 = argv[2];
}

char *rt_join(const char *a, const char *b)
{
    char *out = NULL;
    if (asprintf(&out, "%s/%s", a, b) < 0)
        abort();
    return out;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    return remove(path) < 0 ? -1 : 0;
}

int rt_setup(void **state)
{
    rt_fixture *fx = calloc(1, sizeof(*fx));
    assert_non_null(fx);
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    fx->tmp = rt_join(base, "rel-test-XXXXXX");
    assert_non_null(mkdtemp(fx->tmp));
    fx->releases = rt_join(fx->tmp, "releases");
    act_error err = {0};
    int r = rel_store_open(fx->releases, &fx->store, &err);
    if (r < 0)
        fail_msg("rel_store_open: %s", err.message);
    *state = fx;
    return 0;
}

int rt_teardown(void **state)
{
    rt_fixture *fx = *state;
    rel_store_free(fx->store);
    nftw(fx->tmp, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(fx->releases);
    free(fx->tmp);
    free(fx);
    return 0;
}

void rt_write_file(const char *path, const void *data, size_t len, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        fail_msg("open %s: %s", path, strerror(errno));
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
}

static char *read_whole(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        fail_msg("open %s: %s", path, strerror(errno));
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    char *buf = malloc((size_t)st.st_size + 1);
    assert_non_null(buf);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        assert_true(n > 0);
        got += (size_t)n;
    }
    close(fd);
    *len = got;
    return buf;
}

void rt_copy_file(const char *from, const char *to, mode_t mode)
{
    size_t len = 0;
    char *data = read_whole(from, &len);
    rt_write_file(to, data, len, mode);
    free(data);
}

void rt_sha256_file(const char *path, char out[65])
{
    size_t len = 0;
    char *data = read_whole(path, &len);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    assert_int_equal(EVP_Digest(data, len, md, &md_len, EVP_sha256(), NULL), 1);
    assert_int_equal(md_len, 32);
    for (unsigned int i = 0; i < md_len; i++)
        sprintf(out + 2 * i, "%02x", md[i]);
    free(data);
}

int rt_exec_fd(int fd, char *out, size_t out_size)
{
    int pipe_fds[2];
    assert_int_equal(pipe2(pipe_fds, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* Only async-signal-safe calls between fork and exec. */
        dup2(pipe_fds[1], STDOUT_FILENO);
        char *const argv[] = {"rel-test-app", NULL};
        extern char **environ;
        execveat(fd, "", argv, environ, AT_EMPTY_PATH);
        _exit(127);
    }
    close(pipe_fds[1]);
    size_t got = 0;
    for (;;) {
        ssize_t n = read(pipe_fds[0], out + got, out_size - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
        if (got == out_size - 1)
            break;
    }
    out[got] = '\0';
    close(pipe_fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return status;
}

int rt_count_prefix(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : -1;
    int count = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strncmp(de->d_name, prefix, strlen(prefix)) == 0)
            count++;
    closedir(d);
    return count;
}

int rt_exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

void rt_flip_byte(const char *path, off_t offset)
{
    assert_int_equal(chmod(path, 0755), 0);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    assert_true(fd >= 0);
    unsigned char byte;
    assert_int_equal(pread(fd, &byte, 1, offset), 1);
    byte ^= 0xff;
    assert_int_equal(pwrite(fd, &byte, 1, offset), 1);
    close(fd);
    assert_int_equal(chmod(path, 0555), 0);
}

void rt_promote_and_expect_output(rt_fixture *fx, const char *host, const char *version,
                                  const char *expected)
{
    act_error err = {0};
    if (rel_promote(fx->store, host, version, &err) < 0)
        fail_msg("promote: %s", err.message);
    rel_resolved resolved;
    if (rel_resolve(fx->store, host, NULL, NULL, &resolved, &err) < 0)
        fail_msg("resolve: %s", err.message);
    char output[256];
    int status = rt_exec_fd(resolved.exec_fd, output, sizeof(output));
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_string_equal(output, expected);
    rel_resolved_release(&resolved);
}
