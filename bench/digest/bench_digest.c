/* bench-digest: resolve's hashing path against sha256sum on the same 256 MiB
 * staged file, in the same run, warm page cache for both, medians of several
 * runs. Target: RATIO (ours / sha256sum, in time) <= 1.0.
 *
 *   bench-digest [runs] [size_mib]    defaults: 7 runs, 256 MiB */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "release/release.h"

extern char **environ;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *values, size_t n)
{
    qsort(values, n, sizeof(*values), cmp_u64);
    return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    return remove(path) < 0 ? -1 : 0;
}

/* Pseudo-random bytes (xorshift64), so no layer can shortcut a run of zeros
 * and the file costs no entropy to make. */
static int write_source(const char *path, size_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
    if (fd < 0)
        return -errno;
    size_t block = 1u << 20;
    uint64_t *buf = malloc(block);
    if (!buf) {
        close(fd);
        return -ENOMEM;
    }
    uint64_t state = 0x9e3779b97f4a7c15ull;
    for (size_t done = 0; done < size; done += block) {
        for (size_t i = 0; i < block / sizeof(uint64_t); i++) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            buf[i] = state;
        }
        if (write(fd, buf, block) != (ssize_t)block) {
            free(buf);
            close(fd);
            return -EIO;
        }
    }
    free(buf);
    close(fd);
    return 0;
}

/* Reads the whole file once so both contenders start from a warm cache. */
static void warm(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char *buf = malloc(1u << 20);
    while (buf && read(fd, buf, 1u << 20) > 0) {
    }
    free(buf);
    close(fd);
}

/* Runs sha256sum on path and returns its wall time; its digest goes to out
 * so the run can prove both sides hashed the same bytes. */
static int run_sha256sum(const char *path, uint64_t *usec, char out[65])
{
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) < 0)
        return -errno;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
    char *const argv[] = {"sha256sum", (char *)path, NULL};
    uint64_t start = act_now_usec();
    pid_t pid;
    int r = posix_spawnp(&pid, "sha256sum", &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    close(pipe_fds[1]);
    if (r != 0) {
        close(pipe_fds[0]);
        return -r;
    }
    char line[256] = "";
    size_t got = 0;
    ssize_t n;
    while (got < sizeof(line) - 1 &&
           (n = read(pipe_fds[0], line + got, sizeof(line) - 1 - got)) > 0)
        got += (size_t)n;
    close(pipe_fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    *usec = act_now_usec() - start;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || got < 64)
        return -EIO;
    memcpy(out, line, 64);
    out[64] = '\0';
    return 0;
}

int main(int argc, char **argv)
{
    size_t runs = argc > 1 ? strtoul(argv[1], NULL, 10) : 7;
    size_t size_mib = argc > 2 ? strtoul(argv[2], NULL, 10) : 256;
    if (runs == 0 || size_mib == 0) {
        fprintf(stderr, "usage: %s [runs] [size_mib]\n", argv[0]);
        return 2;
    }
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/var/tmp";
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s/bench-digest-XXXXXX", base);
    if (!mkdtemp(tmp)) {
        fprintf(stderr, "cannot create a temporary directory under %s: %s\n", base,
                strerror(errno));
        return 1;
    }
    char source[4200], releases[4200], staged[4300];
    snprintf(source, sizeof(source), "%s/app.bin", tmp);
    snprintf(releases, sizeof(releases), "%s/releases", tmp);
    snprintf(staged, sizeof(staged), "%s/bench/v1/app.bin", releases);

    int status = 1;
    rel_store *store = NULL;
    act_error err = {0};
    uint64_t *ours = calloc(runs, sizeof(uint64_t));
    uint64_t *fd_only = calloc(runs, sizeof(uint64_t));
    uint64_t *theirs = calloc(runs, sizeof(uint64_t));
    if (!ours || !fd_only || !theirs)
        goto out;
    int r = write_source(source, size_mib << 20);
    if (r < 0) {
        fprintf(stderr, "cannot write %zu MiB to %s: %s\n", size_mib, source, strerror(-r));
        goto out;
    }
    /* Stage it for real, so the timed path is rel_resolve itself: live link,
     * manifest, openat2, fstat checks and the hash of the opened fd. */
    if (rel_store_open(releases, &store, &err) < 0 ||
        rel_stage(store, "bench", "v1", source, NULL, NULL, &err) < 0 ||
        rel_promote(store, "bench", "v1", &err) < 0) {
        fprintf(stderr, "setup failed: %s\n", err.message);
        goto out;
    }
    unlink(source); /* only the staged copy is hashed; keep the cache for it */
    warm(staged);

    char expected[65] = "";
    for (size_t i = 0; i < runs; i++) {
        rel_resolved resolved;
        uint64_t start = act_now_usec();
        if (rel_resolve(store, "bench", NULL, NULL, &resolved, &err) < 0) {
            fprintf(stderr, "resolve failed: %s\n", err.message);
            goto out;
        }
        ours[i] = act_now_usec() - start;

        char digest[REL_DIGEST_SIZE];
        start = act_now_usec();
        if (rel_digest_fd(resolved.exec_fd, digest, NULL, &err) < 0) {
            fprintf(stderr, "digest failed: %s\n", err.message);
            rel_resolved_release(&resolved);
            goto out;
        }
        fd_only[i] = act_now_usec() - start;
        rel_resolved_release(&resolved);

        char their_digest[65];
        r = run_sha256sum(staged, &theirs[i], their_digest);
        if (r < 0) {
            fprintf(stderr, "sha256sum %s failed: %s\n", staged, strerror(-r));
            goto out;
        }
        if (strcmp(their_digest, resolved.identity.digest) != 0 ||
            strcmp(digest, resolved.identity.digest) != 0) {
            fprintf(stderr, "digest disagreement: resolve %s, rel_digest_fd %s, sha256sum %s\n",
                    resolved.identity.digest, digest, their_digest);
            goto out;
        }
        snprintf(expected, sizeof(expected), "%s", their_digest);
    }

    uint64_t m_ours = median(ours, runs), m_fd = median(fd_only, runs);
    uint64_t m_theirs = median(theirs, runs);
    double mib = (double)size_mib;
    printf("file: %zu MiB, runs: %zu, warm page cache, digest %s\n", size_mib, runs, expected);
    printf("rel_resolve (open + checks + hash of fd): median %8.1f ms  %7.1f MiB/s\n",
           (double)m_ours / 1000.0, mib / ((double)m_ours / 1e6));
    printf("rel_digest_fd alone:                      median %8.1f ms  %7.1f MiB/s\n",
           (double)m_fd / 1000.0, mib / ((double)m_fd / 1e6));
    printf("sha256sum (baseline, incl. spawn):        median %8.1f ms  %7.1f MiB/s\n",
           (double)m_theirs / 1000.0, mib / ((double)m_theirs / 1e6));
    double ratio = (double)m_ours / (double)m_theirs;
    printf("RATIO %.3f (rel_resolve / sha256sum, time; target <= 1.0: %s)\n", ratio,
           ratio <= 1.0 ? "met" : "NOT met");
    status = 0;
out:
    rel_store_free(store);
    nftw(tmp, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(ours);
    free(fd_only);
    free(theirs);
    return status;
}
