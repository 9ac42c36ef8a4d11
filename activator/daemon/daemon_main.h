/* Entry points of activatord, called from main.c. */
#pragma once

#include <sys/types.h>

#include "common/error.h"

/* Runs the daemon until SIGTERM; returns the process exit code. */
int ad_run(const char *config_path);

/* Validates the daemon file, every host file and what they name on this box
 * (users, groups); prints "FILE:LINE: KEY: what is wrong" lines. Returns the
 * process exit code: 0 when everything is valid. */
int ad_check_config(const char *config_path);
