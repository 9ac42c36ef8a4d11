/* bench-pull: staging an image from a registry against the standard tools
 * doing the same by hand, in the same run.
 *
 * The image: 5 layers of 40 MiB each (4 files of 10 MiB of pseudo-random
 * bytes, so gzip leaves them their size), made by umoci and pushed by
 * skopeo to a real registry (docker-registry) on loopback, with a small
 * executable beside them.
 *
 *   ours:     img_pull (the manifest, the config and each layer fetched and
 *             verified against its digest) + img_open + img_flatten (each
 *             layer verified again as it is applied) + rel_stage_as (the tree
 *             hashed, copied into the release store, every file fsynced);
 *   by hand:  skopeo copy docker://... oci:DIR (fetched and verified) +
 *             umoci unpack (each layer applied) + sync.
 *
 * Runs alternate which goes first; medians with their spread. Target
 * (issue 26): RATIO <= 1.2.
 *
 *   bench-pull [runs]    default: 5 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>

#include "bench/common/bench_util.h"
#include "common/clock.h"
#include "image/image.h"
#include "release/release.h"
#include "tests/image/registry_harness.h"

#define LAYERS 5
#define FILES_PER_LAYER 4
#define FILE_MIB 10


/* FILES_PER_LAYER files of pseudo-random bytes (xorshift64, a different
 * stream per layer) under dir. */
static int write_layer_files(const char *dir, int layer)
{
    size_t block = 1u << 20;
    uint64_t *buf = malloc(block);
    if (!buf)
        return -ENOMEM;
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(layer + 1);
    int r = 0;
    for (int f = 0; r == 0 && f < FILES_PER_LAYER; f++) {
        char path[4300];
        snprintf(path, sizeof(path), "%s/layer%d-file%d", dir, layer, f);
        FILE *out = fopen(path, "we");
        if (!out) {
            r = -errno;
            break;
        }
        for (int mib = 0; mib < FILE_MIB; mib++) {
            for (size_t i = 0; i < block / sizeof(uint64_t); i++) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                buf[i] = x;
            }
            if (fwrite(buf, 1, block, out) != block)
                r = -EIO;
        }
        if (fclose(out) != 0)
            r = -EIO;
    }
    free(buf);
    return r;
}

/* The image, made by umoci (one repack a layer) and pushed by skopeo. */
static int make_image(const char *tmp, const reg_harness *registry)
{
    char script[8192];
    snprintf(script, sizeof(script),
             "cd %s && umoci init --layout img && umoci new --image img:big && "
             "umoci unpack --image img:big bundle >/dev/null && mkdir -p bundle/rootfs/bin "
             "bundle/rootfs/data && cp /bin/true bundle/rootfs/bin/app",
             tmp);
    if (bench_run_sh(script, NULL) < 0)
        return -EIO;
    for (int layer = 0; layer < LAYERS; layer++) {
        char dir[4200];
        if ((size_t)snprintf(dir, sizeof(dir), "%s/bundle/rootfs/data", tmp) >= sizeof(dir))
            return -ENAMETOOLONG;
        if (write_layer_files(dir, layer) < 0)
            return -EIO;
        snprintf(script, sizeof(script), "cd %s && umoci repack --image img:big bundle", tmp);
        if (bench_run_sh(script, NULL) < 0)
            return -EIO;
    }
    char layout[4200];
    snprintf(layout, sizeof(layout), "%s/img", tmp);
    act_error err = {0};
    if (reg_harness_push(registry, layout, "big", "bench/big", &err) < 0) {
        fprintf(stderr, "push: %s\n", err.message);
        return -EIO;
    }
    return 0;
}

/* What the daemon's stage does with a registry's image. */
static int stage_ours(const char *tmp, int run, const reg_harness *registry, uint64_t *usec)
{
    char reference[256], layout[4200], tree[4200], releases[4200], local[4300], source[512];
    snprintf(reference, sizeof(reference), "docker://%s/bench/big:big", registry->address);
    snprintf(layout, sizeof(layout), "%s/ours-%d/layout", tmp, run);
    snprintf(tree, sizeof(tree), "%s/ours-%d/tree", tmp, run);
    snprintf(releases, sizeof(releases), "%s/releases", tmp);
    const char *insecure[] = {registry->address};
    img_registry_options options = {.insecure = insecure, .n_insecure = 1};
    act_error err = {0};
    img_image image = {0};
    rel_store *store = NULL;
    char version[32];
    snprintf(version, sizeof(version), "v%d", run);
    uint64_t start = act_now_usec();
    int r = img_pull(reference, &options, layout, source, sizeof(source), &err);
    snprintf(local, sizeof(local), "oci:%s:" IMG_PULLED_TAG, layout);
    if (r == 0)
        r = img_open(local, &image, &err);
    if (r == 0 && mkdir(tree, 0700) < 0)
        r = act_error_set(&err, errno, "mkdir %s", tree);
    if (r == 0)
        r = img_flatten(&image, tree, &err);
    if (r == 0)
        r = rel_store_open(releases, &store, &err);
    if (r == 0)
        r = rel_stage_as(store, "big", version, tree, "bin/app", source, NULL, &err);
    *usec = act_now_usec() - start;
    if (r < 0)
        fprintf(stderr, "ours: %s\n", err.message);
    img_image_clear(&image);
    rel_store_free(store);
    return r;
}

static int stage_by_hand(const char *tmp, int run, const reg_harness *registry, uint64_t *usec)
{
    char script[8192];
    snprintf(script, sizeof(script),
             "cd %s && mkdir hand-%d && skopeo copy --quiet --src-tls-verify=false "
             "docker://%s/bench/big:big oci:hand-%d/img:big >/dev/null && "
             "umoci unpack --image hand-%d/img:big hand-%d/bundle >/dev/null && sync",
             tmp, run, registry->address, run, run, run);
    int r = bench_run_sh(script, usec);
    if (r < 0)
        fprintf(stderr, "by hand failed: %s\n", script);
    return r;
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 5;
    if (runs < 1 || runs > 50) {
        fprintf(stderr, "usage: %s [runs (1 to 50)]\n", argv[0]);
        return 2;
    }
    if (!reg_harness_available() || system("command -v umoci >/dev/null") != 0) {
        fprintf(stderr, "bench-pull: needs docker-registry, skopeo and umoci "
                        "(scripts/install-deps.sh)\n");
        return 77;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/var/tmp";
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s/bench-pull-XXXXXX", base);
    if (!mkdtemp(tmp)) {
        fprintf(stderr, "cannot create a temporary directory under %s\n", base);
        return 1;
    }
    reg_harness registry;
    act_error err = {0};
    int r = reg_harness_start(&registry, false, false, &err);
    if (r < 0)
        fprintf(stderr, "registry: %s\n", err.message);
    if (r == 0)
        r = make_image(tmp, &registry);
    uint64_t ours[50], hand[50];
    for (int i = 0; r == 0 && i < runs; i++) {
        /* Alternate who goes first, so neither always meets a warmer cache. */
        if (i % 2 == 0)
            r = stage_ours(tmp, i, &registry, &ours[i])
                    ?: stage_by_hand(tmp, i, &registry, &hand[i]);
        else
            r = stage_by_hand(tmp, i, &registry, &hand[i])
                    ?: stage_ours(tmp, i, &registry, &ours[i]);
        if (r == 0)
            printf("run %d: ours %.0f ms, by hand %.0f ms\n", i + 1, ours[i] / 1e3, hand[i] / 1e3);
        fflush(stdout);
    }
    if (r == 0) {
        uint64_t ours_sorted[50], hand_sorted[50];
        memcpy(ours_sorted, ours, sizeof(uint64_t) * (size_t)runs);
        memcpy(hand_sorted, hand, sizeof(uint64_t) * (size_t)runs);
        uint64_t m_ours = bench_median_u64(ours_sorted, (size_t)runs);
        uint64_t m_hand = bench_median_u64(hand_sorted, (size_t)runs);
        printf(
            "image: %d layers of %d MiB (gzip), pushed by skopeo to docker-registry on loopback\n",
            LAYERS, FILES_PER_LAYER * FILE_MIB);
        printf("ours (pull + verify + flatten + stage with fsync): median %.0f ms (%.0f..%.0f)\n",
               m_ours / 1e3, ours_sorted[0] / 1e3, ours_sorted[runs - 1] / 1e3);
        printf("by hand (skopeo copy + umoci unpack + sync):       median %.0f ms (%.0f..%.0f)\n",
               m_hand / 1e3, hand_sorted[0] / 1e3, hand_sorted[runs - 1] / 1e3);
        printf("RATIO %.2f (%+.0f ms) [target <= 1.2]\n", (double)m_ours / (double)m_hand,
               ((double)m_ours - (double)m_hand) / 1e3);
    }
    reg_harness_stop(&registry);
    char script[4200];
    snprintf(script, sizeof(script), "rm -rf %s", tmp);
    bench_run_sh(script, NULL);
    return r == 0 ? 0 : 1;
}
