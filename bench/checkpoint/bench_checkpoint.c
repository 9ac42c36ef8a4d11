/* bench-checkpoint: ckpt_write and ckpt_restore of a 50 MiB state directory
 * (40 files of 1 MiB of pseudo-random bytes, 1000 files of 10 KiB of text)
 * against what an operator would do by hand on the same tree in the same
 * run: `tar -cf - . | zstd > A && sha256sum A && sync`, and
 * `sha256sum A && tar --zstd -xf A -C DIR && sync`. Medians of several runs.
 * ckpt_restore does more than its baseline (the digest checked before and
 * while extracting, owners set, the exchange, the old tree removed), so its
 * target is RATIO <= 1.5; the write's is RATIO <= 1.0.
 *
 *   bench-checkpoint [runs]    default: 5 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/common/bench_util.h"
#include "checkpoint/checkpoint.h"
#include "common/clock.h"


static int write_file(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    ssize_t n = write(fd, data, len);
    close(fd);
    return n == (ssize_t)len ? 0 : -EIO;
}

/* The tree: incompressible blobs (xorshift64, so no layer shortcuts them)
 * and many small compressible files, as an app's data and its metadata. */
static int make_state(const char *state)
{
    char path[8192];
    size_t block = 1u << 20;
    uint64_t *buf = malloc(block);
    if (!buf)
        return -ENOMEM;
    uint64_t x = 0x9e3779b97f4a7c15ull;
    int r = 0;
    snprintf(path, sizeof(path), "%s/blobs", state);
    if (mkdir(path, 0755) < 0)
        r = -errno;
    for (int i = 0; r == 0 && i < 40; i++) {
        for (size_t j = 0; j < block / sizeof(uint64_t); j++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            buf[j] = x;
        }
        snprintf(path, sizeof(path), "%s/blobs/b%02d", state, i);
        r = write_file(path, buf, block);
    }
    snprintf(path, sizeof(path), "%s/small", state);
    if (r == 0 && mkdir(path, 0755) < 0)
        r = -errno;
    char *text = (char *)buf;
    for (int i = 0; r == 0 && i < 1000; i++) {
        size_t len = 0;
        while (len + 64 < 10240)
            len +=
                (size_t)snprintf(text + len, 64, "record %d key-%zu=value-%zu\n", i, len, len * 7);
        snprintf(path, sizeof(path), "%s/small/f%04d", state, i);
        r = write_file(path, text, len);
    }
    free(buf);
    return r;
}

/* sh -c script; its wall time. */
int main(int argc, char **argv)
{
    size_t runs = argc > 1 ? strtoul(argv[1], NULL, 10) : 5;
    if (runs == 0) {
        fprintf(stderr, "usage: %s [runs]\n", argv[0]);
        return 2;
    }
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/var/tmp";
    char tmp[1024];
    snprintf(tmp, sizeof(tmp), "%s/bench-checkpoint-XXXXXX", base);
    if (!mkdtemp(tmp)) {
        fprintf(stderr, "cannot create a temporary directory under %s: %s\n", base,
                strerror(errno));
        return 1;
    }
    char store[1100], host[1100], state[1200], by_hand[1100], script[8192];
    snprintf(store, sizeof(store), "%s/checkpoints", tmp);
    snprintf(host, sizeof(host), "%s/host", tmp);
    snprintf(state, sizeof(state), "%s/state", host);
    snprintf(by_hand, sizeof(by_hand), "%s/by-hand", tmp);
    int status = 1;
    uint64_t *write_ours = calloc(runs, sizeof(uint64_t)), *write_base = calloc(runs, 8);
    uint64_t *restore_ours = calloc(runs, sizeof(uint64_t)), *restore_base = calloc(runs, 8);
    if (!write_ours || !write_base || !restore_ours || !restore_base)
        goto out;
    if (mkdir(store, 0700) < 0 || mkdir(host, 0755) < 0 || mkdir(state, 0750) < 0 ||
        mkdir(by_hand, 0755) < 0 || make_state(state) < 0) {
        fprintf(stderr, "cannot make the state directory under %s\n", tmp);
        goto out;
    }
    uint64_t archive_size = 0;
    for (size_t i = 0; i < runs; i++) {
        act_error err = {0};
        ckpt_info info;
        uint64_t start = act_now_usec();
        if (ckpt_write(store, "bench", state, i + 1, "box-1", NULL, &info, &err) < 0) {
            fprintf(stderr, "ckpt_write: %s\n", err.message);
            goto out;
        }
        write_ours[i] = act_now_usec() - start;
        archive_size = info.size;
        snprintf(script, sizeof(script),
                 "tar -C %s -cf - . | zstd -q -c > %s/a.tar.zst && sha256sum %s/a.tar.zst "
                 ">/dev/null && sync -f %s",
                 state, by_hand, by_hand, by_hand);
        if (bench_run_sh(script, &write_base[i]) < 0) {
            fprintf(stderr, "the baseline failed: %s\n", script);
            goto out;
        }

        start = act_now_usec();
        if (ckpt_restore(store, "bench", info.id, info.sha256, state, geteuid(), getegid(), &err) <
            0) {
            fprintf(stderr, "ckpt_restore: %s\n", err.message);
            goto out;
        }
        restore_ours[i] = act_now_usec() - start;
        /* Removing the last run's tree is the baseline's set-up, not its
         * work: done first, untimed. */
        uint64_t setup_usec;
        snprintf(script, sizeof(script), "rm -rf %s/x && mkdir %s/x && sync -f %s", by_hand,
                 by_hand, by_hand);
        if (bench_run_sh(script, &setup_usec) < 0) {
            fprintf(stderr, "the baseline's set-up failed: %s\n", script);
            goto out;
        }
        snprintf(script, sizeof(script),
                 "sha256sum %s/a.tar.zst >/dev/null && tar --zstd -xf %s/a.tar.zst -C %s/x && "
                 "sync -f %s/x",
                 by_hand, by_hand, by_hand, by_hand);
        if (bench_run_sh(script, &restore_base[i]) < 0) {
            fprintf(stderr, "the baseline failed: %s\n", script);
            goto out;
        }
        (void)ckpt_prune(store, "bench", 1, NULL, 0, &err);
    }
    uint64_t wo = bench_median_u64(write_ours, runs), wb = bench_median_u64(write_base, runs);
    uint64_t ro = bench_median_u64(restore_ours, runs), rb = bench_median_u64(restore_base, runs);
    printf("state 50 MiB (40 x 1 MiB random, 1000 x 10 KiB text), archive %.1f MiB, %zu runs\n",
           archive_size / 1048576.0, runs);
    printf("checkpoint  ckpt_write   %7.1f ms  tar|zstd+sha256sum+sync  %7.1f ms  RATIO %.2f "
           "(target <= 1.0)\n",
           wo / 1000.0, wb / 1000.0, (double)wo / (double)wb);
    printf("restore     ckpt_restore %7.1f ms  sha256sum+tar -x+sync    %7.1f ms  RATIO %.2f "
           "(target <= 1.5)\n",
           ro / 1000.0, rb / 1000.0, (double)ro / (double)rb);
    status = 0;
out:
    free(write_ours);
    free(write_base);
    free(restore_ours);
    free(restore_base);
    snprintf(script, sizeof(script), "rm -rf %s", tmp);
    if (system(script) != 0)
        fprintf(stderr, "cannot remove %s\n", tmp);
    return status;
}
