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

/* What a server never needs; denied with EPERM by the "default" profile.
 * Names the running architecture lacks are skipped. */
static const char *const default_denied[] = {
    /* mount and namespace administration */
    "mount", "umount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr", "unshare", "setns", "open_by_handle_at",
    /* kernel modules */
    "init_module", "finit_module", "delete_module", "create_module", "query_module",
    "get_kernel_syms",
    /* reboot, kexec, swap */
    "reboot", "kexec_load", "kexec_file_load", "swapon", "swapoff",
    /* raw I/O */
    "iopl", "ioperm", "pciconfig_read", "pciconfig_write", "pciconfig_iobase",
    /* debugging and other processes' memory */
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "perf_event_open",
    "lookup_dcookie", "pidfd_getfd", "syslog",
    /* bpf */
    "bpf",
    /* clock setting */
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "stime",
    /* system administration and obsolete calls */
    "acct", "quotactl", "_sysctl", "sysfs", "ustat", "uselib", "nfsservctl", "vm86", "vm86old",
    "afs_syscall", "bdflush", "break", "ftime", "getpmsg", "putpmsg", "gtty", "stty", "lock",
    "mpx", "prof", "profil", "security", "tuxcall", "vserver", "idle",
};

/* Namespace flags clone() is refused with; clone3 passes its flags in
 * memory BPF cannot read, so it is answered ENOSYS and libc falls back to
 * clone(), where these are checked. */
static const unsigned long clone_namespace_flags[] = {
    CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
    CLONE_NEWCGROUP,
};

void cg_seccomp_program_free(cg_seccomp_program *program)
{
    if (!program)
        return;
    free(program->fprog.filter);
    free(program);
}

static bool listed(const char *const *names, const char *name)
{
    for (size_t i = 0; names && names[i]; i++)
        if (strcmp(names[i], name) == 0)
            return true;
    return false;
}

static bool in_default_profile(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(default_denied); i++)
        if (strcmp(default_denied[i], name) == 0)
            return true;
    return false;
}

static int check_names(const char *const *names, const char *list, act_error *err)
{
    for (size_t i = 0; names && names[i]; i++)
        if (seccomp_syscall_resolve_name(names[i]) == __NR_SCMP_ERROR)
            return act_error_set(err, EINVAL,
                                 "seccomp %s list: unknown system call \"%s\"; use names as in "
                                 "syscalls(2)",
                                 list, names[i]);
    return 0;
}

static int deny(scmp_filter_ctx ctx, const char *name, bool builtin, act_error *err)
{
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR)
        return builtin ? 0 : act_error_set(err, EINVAL, "unknown system call %s", name);
    int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
    /* A name from the built-in list that this architecture lacks is fine. */
    if (r < 0 && !(builtin && nr < 0))
        return act_error_set(err, -r, "seccomp: cannot add a rule for %s: %s", name,
                             strerror(-r));
    return 0;
}

static int add_namespace_rules(scmp_filter_ctx ctx, const char *const *allow, act_error *err)
{
    if (!listed(allow, "clone")) {
        for (size_t i = 0; i < ARRAY_SIZE(clone_namespace_flags); i++) {
            int r = seccomp_rule_add(
                ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                SCMP_A0(SCMP_CMP_MASKED_EQ, clone_namespace_flags[i], clone_namespace_flags[i]));
            if (r < 0)
                return act_error_set(err, -r, "seccomp: cannot add the clone rule: %s",
                                     strerror(-r));
        }
    }
    if (!listed(allow, "clone3")) {
        int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
        if (r < 0)
            return act_error_set(err, -r, "seccomp: cannot add the clone3 rule: %s",
                                 strerror(-r));
    }
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

int cg_seccomp_compile(const char *profile, const char *const *allow, const char *const *deny_list,
                       cg_seccomp_program **out, act_error *err)
{
    assert(out);
    *out = NULL;
    bool use_default;
    if (profile && strcmp(profile, "default") == 0)
        use_default = true;
    else if (profile && strcmp(profile, "none") == 0)
        use_default = false;
    else
        return act_error_set(err, EINVAL,
                             "seccomp profile \"%s\" is unknown; use \"default\" or \"none\"",
                             profile ? profile : "(null)");
    int r;
    if ((r = check_names(allow, "allow", err)) < 0 || (r = check_names(deny_list, "deny", err)) < 0)
        return r;
    for (size_t i = 0; deny_list && deny_list[i]; i++)
        if (listed(allow, deny_list[i]))
            return act_error_set(err, EINVAL,
                                 "seccomp: \"%s\" is both allowed and denied; keep it in one "
                                 "list",
                                 deny_list[i]);
    if (!use_default && (!deny_list || !deny_list[0]))
        return 0;

    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx)
        return act_error_set(err, ENOMEM, "seccomp: cannot create a filter");
    r = 0;
    if (use_default) {
        for (size_t i = 0; r == 0 && i < ARRAY_SIZE(default_denied); i++)
            if (!listed(allow, default_denied[i]))
                r = deny(ctx, default_denied[i], true, err);
        if (r == 0)
            r = add_namespace_rules(ctx, allow, err);
    }
    for (size_t i = 0; r == 0 && deny_list && deny_list[i]; i++)
        if (!(use_default && in_default_profile(deny_list[i])))
            r = deny(ctx, deny_list[i], false, err);
    if (r == 0)
        r = export_program(ctx, out, err);
    seccomp_release(ctx);
    return r;
}
