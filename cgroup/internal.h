/* Shared between the files of cgroup/; not part of the public API. */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgroup/cgroup.h"
#include "common/names.h"

/* The controllers whose limits and stats this layer knows. */
enum cg_controller {
    CG_MEMORY,
    CG_PIDS,
    CG_CPU,
    CG_CONTROLLER_COUNT,
};

extern const char *const cg_controller_names[CG_CONTROLLER_COUNT];

struct cg_root {
    char *v2_mount;   /* absolute cgroup2 mount point */
    char *rel;        /* root path relative to the mount, no leading '/' */
    char *v2_path;    /* v2_mount + "/" + rel */
    int dir_fd;       /* the root directory */
    int hosts_fd;     /* <root>/hosts */
    char *subtree_enable; /* "+memory +pids ..." written into new host nodes; "" for none */
    bool v2_has[CG_CONTROLLER_COUNT];  /* enabled for leaves through v2 */
    char *v1_mount[CG_CONTROLLER_COUNT]; /* v1 hierarchy used instead, or NULL */
    bool throwaway;   /* created by cg_root_create_throwaway: ours to delete */
};

struct cg_leaf {
    cg_root *root;
    char host[ACT_NAME_MAX + 1];
    char name[ACT_NAME_MAX + 1];
    char *rel;        /* relative to each mount: <root rel>/hosts/<host>/<name> */
    char *v2_path;
    char *v1_path[CG_CONTROLLER_COUNT];
    int dir_fd;       /* for CLONE_INTO_CGROUP and openat of control files */
    int cgevents_fd;  /* cgroup.events, read with pread and polled for POLLPRI */
    int freeze_fd;    /* cgroup.freeze, opened by the first freeze and kept for the thaw */
    int v1_procs_fd[CG_CONTROLLER_COUNT]; /* the child writes "0" here to join */
    bool force_kill_fallback;
};

/* Mount discovery (mounts.c). */
int cg_find_v2_mount(char **out, act_error *err);
int cg_find_v1_mount(const char *controller, char **out, act_error *err);
int cg_own_v2_cgroup(char **out, act_error *err);

/* Small control-file I/O (cgfile.c). Both return 0 or -errno. */
int cg_write_file_at(int dirfd, const char *name, const char *value);
/* The same on a control file kept open (written at offset 0 each time). */
int cg_write_fd(int fd, const char *value);
int cg_read_file_at(int dirfd, const char *name, char *buf, size_t size);
/* Finds "key <number>" in a flat-keyed file's text. */
bool cg_parse_keyed(const char *text, const char *key, uint64_t *value);

/* Reads key's value from the leaf's cgroup.events into *value, draining its
 * events fd first (when there is one): a change after the read makes the fd
 * readable again, so no edge is lost. 1 when the key is there, 0 when the
 * file has no such line, or a negative errno (err filled) when it cannot be
 * read. */
int cg_leaf_events_read(cg_leaf *leaf, const char *key, uint64_t *value, act_error *err);
/* The pids in dirfd's cgroup.procs, malloc'd; negative errno on failure. */
int cg_read_pids(int dirfd, pid_t **pids, size_t *n);

/* libcgroup glue (v1.c). */
int cg_v1_init(act_error *err);
/* Whether a leaf gets a mirror in controller c's v1 hierarchy. */
bool cg_v1_mirror_needed(const cg_root *root, enum cg_controller c, const cg_limits *limits);
/* Makes the leaf's v1 mirrors and writes its v1 limits. */
int cg_v1_create(cg_root *root, const char *rel, const cg_limits *limits, act_error *err);
/* Makes the v1 mirrors a running leaf lacks for limits (mirror_made[c] says
 * which; the caller moves the leaf's processes into them) and writes every
 * v1 limit of limits into the leaf's mirrors, the unset ones as the
 * defaults. */
int cg_v1_set(cg_leaf *leaf, const cg_limits *limits, bool mirror_made[CG_CONTROLLER_COUNT],
              act_error *err);

/* Limits (limits.c). cg_limits_apply_v2 writes the set limits of a new
 * leaf; cg_limits_set_v2 every limit of a running one, the unset ones as
 * the defaults. */
int cg_limits_apply_v2(cg_leaf *leaf, const cg_limits *limits, act_error *err);
int cg_limits_set_v2(cg_leaf *leaf, const cg_limits *limits, act_error *err);

/* Removes one directory bottom-up in v2 and every v1 mirror; ENOENT counts
 * as removed (root.c). */
int cg_rmdir_everywhere(cg_root *root, const char *rel, act_error *err);

/* Opens any existing cgroup directory below the v2 mount as a leaf handle,
 * for the throwaway teardown and for leaves in general (leaf.c). */
int cg_leaf_open_rel(cg_root *root, const char *rel, const char *host, const char *name,
                     cg_leaf **out, act_error *err);
