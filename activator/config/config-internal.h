/* Shared by the parts of activator/config; not for other layers. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "activator/config/config.h"
#include "common/error.h"

/* Stores one value into target; err says "what is wrong (what to do)". An
 * empty value reaches only repeatable keys, where it clears the list. */
typedef int (*cfg_ini_apply)(void *target, const char *value, act_error *err);

typedef struct cfg_ini_key {
    const char *section; /* "Host" */
    const char *name;    /* "Exec" */
    cfg_ini_apply apply;
    bool repeatable;
} cfg_ini_key;

/* Feeds the INI text of fd through inih to the key table. Unknown sections
 * and keys, keys outside a section, syntax errors, over-long lines, empty
 * values and a single-valued key set twice are reported here; values through
 * each key's apply. key_lines[i] receives the line where keys[i] was last
 * set (0: never), for checks that span keys. Returns the number of problems
 * added to errors, or a negative errno when fd could not be read. */
int cfg_ini_parse_fd(int fd, const char *path, const cfg_ini_key *keys, size_t n_keys, void *target,
                     unsigned *key_lines, cfg_errors *errors);

/* Opens the hosts directory, or reports why not (as a problem of dir). */
int cfg_open_hosts_dir(const char *dir, cfg_errors *errors);

/* The host name a file of the hosts directory gives ("web1.conf": "web1"),
 * or -EINVAL with the reason added to errors (a path, no .conf, a name
 * act_name_check refuses). */
int cfg_host_name_from_file(const char *dir, const char *file_name, char **name,
                            cfg_errors *errors);

/* cfg_load_host_file on an open hosts directory (dir names it in
 * errors). */
int cfg_load_host_at(int dir_fd, const char *dir, const char *file_name, cfg_host *host,
                     cfg_errors *errors);
