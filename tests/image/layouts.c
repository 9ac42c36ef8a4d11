/* OCI image layouts for the image tests, made by umoci. */
#include "tests/image/layouts.h"

#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

/* Runs a shell command (umoci, cp, rm: the tools make the image), failing
 * the test unless it exits 0. */
void image_run(const char *fmt, ...)
{
    char command[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(command, sizeof(command), fmt, ap);
    va_end(ap);
    int status = system(command);
    if (status != 0)
        fail_msg("command failed (status %d): %s", status, command);
}

/* An image layout at <tmp>/img with tag v1 (one layer: an app, a hard link
 * to it, a library behind a relative and an absolute symlink, and files to
 * delete) and v2 (a second layer deleting a directory and a file, adding
 * one), and tag arm: v1 said to be for arm64. */
char *image_make_layout(rt_fixture *fx)
{
    char *layout = rt_join(fx->tmp, "img");
    const char *t = fx->tmp;
    char app[PATH_MAX];
    assert_non_null(realpath(rt_app_v1, app));
    image_run("cd %s && umoci init --layout img && umoci new --image img:v1 && "
              "umoci unpack --image img:v1 b1 >/dev/null",
              t);
    image_run(
        "cd %s/b1/rootfs && mkdir -p bin lib etc gone y && cp %s bin/app && chmod 0755 bin/app && "
        "ln bin/app bin/app-hard && echo library > lib/libx.so.1 && ln -s libx.so.1 lib/libx.so && "
        "ln -s /lib/libx.so.1 etc/abs && echo x > gone/file && echo b > y/b && echo c > y/c",
        t, app);
    image_run(
        "cd %s && umoci repack --image img:v1 b1 && umoci unpack --image img:v1 b2 >/dev/null", t);
    image_run("cd %s/b2/rootfs && rm -rf gone && rm y/b && echo new > y/new", t);
    image_run("cd %s && umoci repack --image img:v2 b2 && "
              "umoci config --image img:v1 --tag arm --architecture arm64",
              t);
    return layout;
}
