/* Paths in configuration values. An absolute path is checked by
 * act_path_check_absolute (common/paths.h), the rule claims/ shares. */
#pragma once

#include "common/error.h"

/* A path inside a staged build ("bin/server"): relative, not empty, with no
 * "." or ".." component, so it can only name a file beneath the build. */
int cfg_parse_build_path(const char *text, act_error *err);

/* One word of ReadWritePaths= (systemd's syntax): an absolute path with no
 * "." or ".." component, optionally after "-", which keeps the host
 * starting when the path is missing. Not "/" (the whole box), and nothing
 * beneath /proc, which each generation gets fresh. */
int cfg_parse_read_write_path(const char *word, act_error *err);
