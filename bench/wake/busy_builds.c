/* See busy_builds.h. */
#include "bench/wake/busy_builds.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The build as an image: umoci makes it, skopeo pushes it. */
static int make_image(busy_builds *busy, const reg_harness *registry, const char *exec,
                      act_error *err)
{
    char command[4 * PATH_MAX];
    snprintf(command, sizeof(command),
             "cd %s && umoci init --layout big-img && umoci new --image big-img:v1 && "
             "umoci unpack --image big-img:v1 big-bundle >/dev/null && "
             "cp %s big-bundle/rootfs/%s && umoci repack --image big-img:v1 big-bundle && "
             "rm -rf big-bundle",
             busy->d->dir, busy->source, exec);
    if (system(command) != 0)
        return act_error_set(err, EIO, "umoci could not make the image: %s", command);
    char layout[PATH_MAX + 16];
    snprintf(layout, sizeof(layout), "%s/big-img", busy->d->dir);
    int r = reg_harness_push(registry, layout, "v1", "busy/big", err);
    if (r == 0)
        snprintf(busy->image, sizeof(busy->image), "docker://%s/busy/big:v1", registry->address);
    return r;
}

int busy_builds_prepare(busy_builds *busy, dd_daemon *d, const char *host, const char *app,
                        size_t mib, const reg_harness *registry, const char *exec, act_error *err)
{
    *busy = (busy_builds){.d = d, .host = host, .mib = mib};
    snprintf(busy->source, sizeof(busy->source), "%s/big-build", d->dir);
    int in = open(app, O_RDONLY | O_CLOEXEC);
    int out = open(busy->source, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    if (in < 0 || out < 0) {
        int e = errno;
        if (in >= 0)
            close(in);
        if (out >= 0)
            close(out);
        return act_error_set(err, e, "cannot make the large build %s from %s: %s", busy->source,
                             app, strerror(e));
    }
    static char block[1 << 20];
    ssize_t n;
    size_t written = 0;
    int r = 0;
    while (r == 0 && (n = read(in, block, sizeof(block))) > 0) {
        if (write(out, block, (size_t)n) != n)
            r = -errno;
        written += (size_t)n;
    }
    memset(block, 0, sizeof(block));
    while (r == 0 && written < mib << 20) {
        size_t chunk =
            (mib << 20) - written < sizeof(block) ? (mib << 20) - written : sizeof(block);
        if (write(out, block, chunk) != (ssize_t)chunk)
            r = -errno;
        written += chunk;
    }
    close(in);
    if (close(out) < 0 && r == 0)
        r = -errno;
    if (r < 0)
        return act_error_set(err, -r, "cannot write the large build %s: %s", busy->source,
                             strerror(-r));
    return registry ? make_image(busy, registry, exec, err) : 0;
}

static void *run(void *data)
{
    busy_builds *busy = data;
    for (unsigned i = 1; !atomic_load(&busy->stop); i++) {
        act_error err = {0};
        atomic_store(&busy->in_flight, 1);
        atomic_fetch_add(&busy->cycles_begun, 1);
        /* Two requests, as an operator makes them: the stage copies (or
         * pulls) and hashes the build, the promote hashes it all again. */
        bool pull = busy->image[0] && i % 2 == 0;
        int r = dd_request(busy->d, 600000, NULL, &err,
                           "{\"v\":1,\"op\":\"stage\",\"host\":\"%s\",\"version\":\"b%u\","
                           "\"path\":\"%s\"}",
                           busy->host, i, pull ? busy->image : busy->source);
        if (r == 0)
            r = dd_request(busy->d, 600000, NULL, &err,
                           "{\"v\":1,\"op\":\"promote\",\"host\":\"%s\",\"version\":\"b%u\"}",
                           busy->host, i);
        atomic_store(&busy->in_flight, 0);
        if (r < 0) {
            busy->failed = r;
            busy->err = err;
            break;
        }
        atomic_fetch_add(&busy->cycles_done, 1);
        if (pull)
            atomic_fetch_add(&busy->pulls_done, 1);
    }
    return NULL;
}

int busy_builds_start(busy_builds *busy, act_error *err)
{
    int r = pthread_create(&busy->thread, NULL, run, busy);
    if (r != 0)
        return act_error_set(err, r, "cannot start the busy-box thread: %s", strerror(r));
    busy->started = true;
    while (!atomic_load(&busy->cycles_begun))
        sched_yield();
    return 0;
}

int busy_builds_stop(busy_builds *busy, act_error *err)
{
    if (!busy->started)
        return 0;
    atomic_store(&busy->stop, true);
    pthread_join(busy->thread, NULL);
    busy->started = false;
    if (busy->failed < 0) {
        if (err)
            *err = busy->err;
        return busy->failed;
    }
    return 0;
}
