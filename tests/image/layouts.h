/* OCI image layouts for the image tests, made by umoci. */
#pragma once

#include "tests/release/helpers.h"

/* Runs a shell command (umoci, cp, rm: the tools make the image), failing
 * the test unless it exits 0. */
void image_run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* An image layout at <tmp>/img with tag v1 (one layer: an app, a hard link
 * to it, a library behind a relative and an absolute symlink, and files to
 * delete) and v2 (a second layer deleting a directory and a file, adding
 * one), and tag arm: v1 said to be for arm64. Its path, malloc'd. */
char *image_make_layout(rt_fixture *fx);
