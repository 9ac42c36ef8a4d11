/* Entry points of activatord, called from box/main.c. */
#pragma once

#include <signal.h>
#include <sys/types.h>

#include "common/error.h"

/* The signal on which the daemon hands over to its successor instead of
 * stopping (the unit's RestartKillSignal=). */
#define AD_HANDOVER_SIGNAL SIGUSR2

/* Runs the daemon until SIGTERM (a clean stop: every generation retired) or
 * AD_HANDOVER_SIGNAL (a handover: every generation left running); returns
 * the process exit code. */
int ad_run(const char *config_path);

/* Validates the daemon file, every host file and what they name on this box
 * (users, groups); prints "FILE:LINE: KEY: what is wrong" lines. Returns the
 * process exit code: 0 when everything is valid. */
int ad_check_config(const char *config_path);
