/* Seccomp profiles, compiled in the parent with libseccomp and exported as
 * a BPF program, so the child between clone3 and exec loads it with one
 * seccomp() syscall and never calls into libseccomp. */
#include <assert.h>
#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cgroup/internal.h"
#include "cgroup/seccomp_internal.h"
#include "common/cleanup.h"

/* Above every system call number of the architectures we build for; a
 * larger number (x32's, say) is not one of ours. */
#define SYSCALL_NR_MAX 1024

/* The default allow-list is systemd's @system-service without what lets a
 * tenant reach past its own processes and files:
 * - @keyring: the kernel's keyrings are kernel state a host has no use
 *   for, and a way to park data and reach kernel code beside the box's;
 * - io_uring: its operations run inside the kernel without passing through
 *   this filter, so allowing it would allow every call it can make;
 * - unshare and setns: namespaces (clone's namespace flags follow unshare,
 *   see add_rules). */
static const char *const default_base = "@system-service";
static const char *const default_taken_off[] = {
    "@keyring", "io_uring_setup", "io_uring_enter", "io_uring_register", "unshare", "setns",
};

/* The namespace flags clone() is refused with where namespaces are not
 * allowed. clone3 passes its flags in memory BPF cannot read, so there it
 * is answered ENOSYS and libc falls back to clone(), where these are
 * checked. */
static const unsigned long clone_namespace_flags = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC |
                                                   CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET |
                                                   CLONE_NEWCGROUP;

void cg_seccomp_program_free(cg_seccomp_program *program)
{
    if (!program)
        return;
    free(program->fprog.filter);
    free(program);
}

typedef int (*each_call_fn)(const char *name, int nr, void *data);

/* Calls each for every system call that name is or (a group) holds,
 * groups within groups included. Names this architecture lacks are
 * skipped: a group lists the calls of every architecture. Returns -ENOENT
 * for an unknown group, -EINVAL for an unknown call outside a group. */
static int expand(const char *name, bool in_group, each_call_fn each, void *data, unsigned depth)
{
    if (name[0] == '@') {
        const cg_seccomp_group *group = cg_seccomp_group_find(name);
        if (!group || depth > 4)
            return -ENOENT;
        for (const char *const *member = group->members; *member; member++) {
            int r = expand(*member, true, each, data, depth + 1);
            if (r < 0)
                return r;
        }
        return 0;
    }
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR)
        return in_group ? 0 : -EINVAL;
    if (nr < 0 || nr >= SYSCALL_NR_MAX)
        return 0;
    return each(name, nr, data);
}

typedef struct public_each {
    int (*each)(const char *name, void *data);
    void *data;
} public_each;

static int call_public(const char *name, int nr, void *data)
{
    (void)nr;
    public_each *outer = data;
    return outer->each(name, outer->data);
}

int cg_seccomp_expand(const char *name, int (*each)(const char *name, void *data), void *data)
{
    assert(name && each);
    public_each outer = {each, data};
    return expand(name, false, call_public, &outer, 0);
}

/* The calls a profile names, by number: what an allow-list allows or a
 * deny-list denies. */
typedef struct syscall_set {
    bool has[SYSCALL_NR_MAX];
} syscall_set;

static int set_add(const char *name, int nr, void *data)
{
    (void)name;
    ((syscall_set *)data)->has[nr] = true;
    return 0;
}

static int set_remove(const char *name, int nr, void *data)
{
    (void)name;
    ((syscall_set *)data)->has[nr] = false;
    return 0;
}

static bool set_has(const syscall_set *set, const char *name)
{
    int nr = seccomp_syscall_resolve_name(name);
    return nr >= 0 && nr < SYSCALL_NR_MAX && set->has[nr];
}

static int apply_names(syscall_set *set, const char *const *names, each_call_fn each,
                       const char *list, act_error *err)
{
    for (size_t i = 0; names && names[i]; i++) {
        int r = expand(names[i], false, each, set, 0);
        if (r == -ENOENT)
            return act_error_set(err, EINVAL,
                                 "seccomp %s list: unknown group \"%s\"; use a group systemd "
                                 "knows, e.g. @network-io (systemd-analyze syscall-filter lists "
                                 "them)",
                                 list, names[i]);
        if (r == -EINVAL)
            return act_error_set(err, EINVAL,
                                 "seccomp %s list: unknown system call \"%s\"; use names as in "
                                 "syscalls(2)",
                                 list, names[i]);
        if (r < 0)
            return act_error_set(err, -r, "seccomp: %s", strerror(-r));
    }
    return 0;
}

static bool listed(const char *const *names, const char *name)
{
    for (size_t i = 0; names && names[i]; i++)
        if (strcmp(names[i], name) == 0)
            return true;
    return false;
}

static int rule_failed(int r, const char *what, act_error *err)
{
    return act_error_set(err, -r, "seccomp: cannot add the rule for %s: %s", what, strerror(-r));
}

/* One rule per call of the set, with action, and clone and clone3 as
 * namespaces say: an allow-list allows namespaces when it allows unshare,
 * a deny-list refuses them when it denies unshare. */
static int add_rules(scmp_filter_ctx ctx, const syscall_set *set, bool allow_list, act_error *err)
{
    uint32_t action = allow_list ? SCMP_ACT_ALLOW : SCMP_ACT_ERRNO(EPERM);
    bool namespaces = allow_list == set_has(set, "unshare");
    int clone_nr = SCMP_SYS(clone), clone3_nr = SCMP_SYS(clone3);
    int r;
    for (int nr = 0; nr < SYSCALL_NR_MAX; nr++) {
        if (!set->has[nr] || (!namespaces && (nr == clone_nr || nr == clone3_nr)))
            continue;
        /* -EDOM: a number libseccomp does not filter on this architecture. */
        if ((r = seccomp_rule_add(ctx, action, nr, 0)) < 0 && r != -EDOM)
            return rule_failed(r, "a system call", err);
    }
    if (namespaces)
        return 0;
    if (allow_list && set->has[clone_nr]) {
        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, clone_nr, 1,
                             SCMP_A0(SCMP_CMP_MASKED_EQ, clone_namespace_flags, 0));
        if (r < 0)
            return rule_failed(r, "clone", err);
    } else if (!allow_list && set->has[clone_nr]) {
        if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), clone_nr, 0)) < 0)
            return rule_failed(r, "clone", err);
    } else if (!allow_list) {
        /* One rule per flag: any one of them refuses the call. */
        for (unsigned bit = 0; bit < 8 * sizeof(unsigned long); bit++) {
            unsigned long flag = 1UL << bit;
            if (!(clone_namespace_flags & flag))
                continue;
            r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), clone_nr, 1,
                                 SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
            if (r < 0)
                return rule_failed(r, "clone", err);
        }
    }
    /* A deny-list that names clone3 refuses it as it says; otherwise libc
     * is sent to clone. */
    uint32_t clone3_action =
        !allow_list && set->has[clone3_nr] ? SCMP_ACT_ERRNO(EPERM) : SCMP_ACT_ERRNO(ENOSYS);
    if ((r = seccomp_rule_add(ctx, clone3_action, clone3_nr, 0)) < 0)
        return rule_failed(r, "clone3", err);
    return 0;
}

/* libseccomp 2.5 exports only to an fd; a memfd keeps it in memory. */
static int export_program(scmp_filter_ctx ctx, cg_seccomp_program **out, act_error *err)
{
    _cleanup_close_ int fd = memfd_create("cg-seccomp", MFD_CLOEXEC);
    if (fd < 0)
        return act_error_set(err, errno, "seccomp: cannot create a memfd: %s", strerror(errno));
    int r = seccomp_export_bpf(ctx, fd);
    if (r < 0)
        return act_error_set(err, -r, "seccomp: cannot export the filter: %s", strerror(-r));
    off_t size = lseek(fd, 0, SEEK_END);
    if (size <= 0 || size % (off_t)sizeof(struct sock_filter) != 0 ||
        size / (off_t)sizeof(struct sock_filter) > BPF_MAXINSNS)
        return act_error_set(err, EINVAL, "seccomp: exported filter has a bad size %lld",
                             (long long)size);
    _cleanup_(cg_seccomp_program_freep) cg_seccomp_program *program =
        calloc(1, sizeof(*program));
    if (!program || !(program->fprog.filter = malloc((size_t)size)))
        return act_error_set(err, ENOMEM, "out of memory");
    errno = 0;
    if (pread(fd, program->fprog.filter, (size_t)size, 0) != size)
        return act_error_set(err, errno ? errno : EIO,
                             "seccomp: cannot read the exported filter back");
    program->fprog.len = (unsigned short)(size / (off_t)sizeof(struct sock_filter));
    *out = TAKE_PTR(program);
    return 0;
}

int cg_seccomp_compile(const char *profile, const char *const *allow, const char *const *deny,
                       cg_seccomp_program **out, act_error *err)
{
    assert(out);
    *out = NULL;
    bool from_default = false, allow_list = true;
    if (profile && strcmp(profile, "default") == 0)
        from_default = true;
    else if (profile && strcmp(profile, "none") == 0)
        allow_list = false;
    else if (!profile || strcmp(profile, "allow") != 0)
        return act_error_set(err, EINVAL,
                             "seccomp profile \"%s\" is unknown; use \"default\", \"allow\" or "
                             "\"none\"",
                             profile ? profile : "(null)");
    for (size_t i = 0; deny && deny[i]; i++)
        if (listed(allow, deny[i]))
            return act_error_set(err, EINVAL,
                                 "seccomp: \"%s\" is both allowed and denied; keep it in one "
                                 "list",
                                 deny[i]);
    _cleanup_free_ syscall_set *set = calloc(1, sizeof(*set));
    if (!set)
        return act_error_set(err, ENOMEM, "out of memory");
    int r;
    if (from_default) {
        if ((r = apply_names(set, (const char *const[]){default_base, NULL}, set_add, "default",
                             err)) < 0)
            return r;
        for (size_t i = 0; i < ARRAY_SIZE(default_taken_off); i++)
            if ((r = expand(default_taken_off[i], true, set_remove, set, 0)) < 0)
                return act_error_set(err, EINVAL, "seccomp: the default list is broken at %s",
                                     default_taken_off[i]);
    }
    /* An allow-list: allow adds, deny takes off. A deny-list: deny adds,
     * allow takes off. Both are checked for unknown names either way. */
    if ((r = apply_names(set, allow, allow_list ? set_add : set_remove, "allow", err)) < 0 ||
        (r = apply_names(set, deny, allow_list ? set_remove : set_add, "deny", err)) < 0)
        return r;
    if (!allow_list) {
        bool any = false;
        for (int nr = 0; nr < SYSCALL_NR_MAX && !any; nr++)
            any = set->has[nr];
        if (!any)
            return 0;
    }

    scmp_filter_ctx ctx = seccomp_init(allow_list ? SCMP_ACT_ERRNO(EPERM) : SCMP_ACT_ALLOW);
    if (!ctx)
        return act_error_set(err, ENOMEM, "seccomp: cannot create a filter");
    /* A binary tree of the system call numbers rather than a list: the
     * kernel runs the program for every call number when it is attached (to
     * cache which are always allowed) and the app for every call it makes,
     * and a list of 300 compares costs both hundreds of microseconds. */
    r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
    if (r < 0)
        r = act_error_set(err, -r, "seccomp: cannot ask for a binary tree: %s", strerror(-r));
    else
        r = add_rules(ctx, set, allow_list, err);
    if (r == 0)
        r = export_program(ctx, out, err);
    seccomp_release(ctx);
    return r;
}
