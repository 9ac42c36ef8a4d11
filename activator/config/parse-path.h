/* Paths in configuration values. */
#pragma once

#include "common/error.h"

/* An absolute path with no "." or ".." component and no control character,
 * shorter than PATH_MAX. */
int act_parse_absolute_path(const char *text, act_error *err);

/* A path inside a staged build ("bin/server"): relative, not empty, with no
 * "." or ".." component, so it can only name a file beneath the build. */
int act_parse_build_path(const char *text, act_error *err);
