/* systemd's system call groups (SystemCallFilter=@name), as systemd 252
 * (Debian 12) defines them: `systemd-analyze syscall-filter` printed this
 * table, so a host file means here what it means in a unit. Names this
 * architecture lacks are skipped when a filter is compiled. */
#include "cgroup/seccomp_internal.h"

#include <stddef.h>
#include <string.h>

/* The names are packed as systemd-analyze lists them. */
/* clang-format off */
static const char *const group_default[] = {
    "arch_prctl", "brk", "cacheflush", "clock_getres", "clock_getres_time64", "clock_gettime",
    "clock_gettime64", "clock_nanosleep", "clock_nanosleep_time64", "execve", "exit", "exit_group",
    "futex", "futex_time64", "futex_waitv", "get_robust_list", "get_thread_area", "getegid",
    "getegid32", "geteuid", "geteuid32", "getgid", "getgid32", "getgroups", "getgroups32",
    "getpgid", "getpgrp", "getpid", "getppid", "getrandom", "getresgid", "getresgid32",
    "getresuid", "getresuid32", "getrlimit", "getsid", "gettid", "gettimeofday", "getuid",
    "getuid32", "membarrier", "mmap", "mmap2", "mprotect", "munmap", "nanosleep", "pause",
    "prlimit64", "restart_syscall", "riscv_flush_icache", "riscv_hwprobe", "rseq", "rt_sigreturn",
    "sched_getaffinity", "sched_yield", "set_robust_list", "set_thread_area", "set_tid_address",
    "set_tls", "sigreturn", "time", "ugetrlimit", "uretprobe", NULL,
};
static const char *const group_aio[] = {
    "io_cancel", "io_destroy", "io_getevents", "io_pgetevents", "io_pgetevents_time64", "io_setup",
    "io_submit", "io_uring_enter", "io_uring_register", "io_uring_setup", NULL,
};
static const char *const group_basic_io[] = {
    "_llseek", "close", "close_range", "dup", "dup2", "dup3", "lseek", "pread64", "preadv",
    "preadv2", "pwrite64", "pwritev", "pwritev2", "read", "readv", "write", "writev", NULL,
};
static const char *const group_chown[] = {
    "chown", "chown32", "fchown", "fchown32", "fchownat", "lchown", "lchown32", NULL,
};
static const char *const group_clock[] = {
    "adjtimex", "clock_adjtime", "clock_adjtime64", "clock_settime", "clock_settime64",
    "settimeofday", NULL,
};
static const char *const group_cpu_emulation[] = {
    "modify_ldt", "subpage_prot", "switch_endian", "vm86", "vm86old", NULL,
};
static const char *const group_debug[] = {
    "lookup_dcookie", "perf_event_open", "pidfd_getfd", "ptrace", "rtas", "s390_runtime_instr",
    "sys_debug_setcontext", NULL,
};
static const char *const group_file_system[] = {
    "access", "chdir", "chmod", "close", "creat", "faccessat", "faccessat2", "fallocate", "fchdir",
    "fchmod", "fchmodat", "fchmodat2", "fcntl", "fcntl64", "fgetxattr", "flistxattr",
    "fremovexattr", "fsetxattr", "fstat", "fstat64", "fstatat64", "fstatfs", "fstatfs64",
    "ftruncate", "ftruncate64", "futimesat", "getcwd", "getdents", "getdents64", "getxattr",
    "inotify_add_watch", "inotify_init", "inotify_init1", "inotify_rm_watch", "lgetxattr", "link",
    "linkat", "listxattr", "llistxattr", "lremovexattr", "lsetxattr", "lstat", "lstat64", "mkdir",
    "mkdirat", "mknod", "mknodat", "newfstatat", "oldfstat", "oldlstat", "oldstat", "open",
    "openat", "openat2", "readlink", "readlinkat", "removexattr", "rename", "renameat",
    "renameat2", "rmdir", "setxattr", "stat", "stat64", "statfs", "statfs64", "statx", "symlink",
    "symlinkat", "truncate", "truncate64", "unlink", "unlinkat", "utime", "utimensat",
    "utimensat_time64", "utimes", NULL,
};
static const char *const group_io_event[] = {
    "_newselect", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_ctl_old", "epoll_pwait",
    "epoll_pwait2", "epoll_wait", "epoll_wait_old", "eventfd", "eventfd2", "poll", "ppoll",
    "ppoll_time64", "pselect6", "pselect6_time64", "select", NULL,
};
static const char *const group_ipc[] = {
    "ipc", "memfd_create", "mq_getsetattr", "mq_notify", "mq_open", "mq_timedreceive",
    "mq_timedreceive_time64", "mq_timedsend", "mq_timedsend_time64", "mq_unlink", "msgctl",
    "msgget", "msgrcv", "msgsnd", "pipe", "pipe2", "process_madvise", "process_vm_readv",
    "process_vm_writev", "semctl", "semget", "semop", "semtimedop", "semtimedop_time64", "shmat",
    "shmctl", "shmdt", "shmget", NULL,
};
static const char *const group_keyring[] = {
    "add_key", "keyctl", "request_key", NULL,
};
static const char *const group_memlock[] = {
    "mlock", "mlock2", "mlockall", "munlock", "munlockall", NULL,
};
static const char *const group_module[] = {
    "delete_module", "finit_module", "init_module", NULL,
};
static const char *const group_mount[] = {
    "chroot", "fsconfig", "fsmount", "fsopen", "fspick", "mount", "mount_setattr", "move_mount",
    "open_tree", "pivot_root", "umount", "umount2", NULL,
};
static const char *const group_network_io[] = {
    "accept", "accept4", "bind", "connect", "getpeername", "getsockname", "getsockopt", "listen",
    "recv", "recvfrom", "recvmmsg", "recvmmsg_time64", "recvmsg", "send", "sendmmsg", "sendmsg",
    "sendto", "setsockopt", "shutdown", "socket", "socketcall", "socketpair", NULL,
};
static const char *const group_obsolete[] = {
    "_sysctl", "afs_syscall", "bdflush", "break", "create_module", "ftime", "get_kernel_syms",
    "getpmsg", "gtty", "idle", "lock", "mpx", "prof", "profil", "putpmsg", "query_module",
    "security", "sgetmask", "ssetmask", "stime", "stty", "sysfs", "tuxcall", "ulimit", "uselib",
    "ustat", "vserver", NULL,
};
static const char *const group_pkey[] = {
    "pkey_alloc", "pkey_free", "pkey_mprotect", NULL,
};
static const char *const group_privileged[] = {
    "@chown", "@clock", "@module", "@raw-io", "@reboot", "@swap", "_sysctl", "acct", "bpf",
    "capset", "chroot", "fanotify_init", "fanotify_mark", "nfsservctl", "open_by_handle_at",
    "pivot_root", "quotactl", "quotactl_fd", "setdomainname", "setfsuid", "setfsuid32",
    "setgroups", "setgroups32", "sethostname", "setresuid", "setresuid32", "setreuid",
    "setreuid32", "setuid", "setuid32", "vhangup", NULL,
};
static const char *const group_process[] = {
    "capget", "clone", "clone3", "execveat", "fork", "getrusage", "kill", "pidfd_open",
    "pidfd_send_signal", "prctl", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "setns", "swapcontext",
    "tgkill", "times", "tkill", "unshare", "vfork", "wait4", "waitid", "waitpid", NULL,
};
static const char *const group_raw_io[] = {
    "ioperm", "iopl", "pciconfig_iobase", "pciconfig_read", "pciconfig_write",
    "s390_pci_mmio_read", "s390_pci_mmio_write", NULL,
};
static const char *const group_reboot[] = {
    "kexec_file_load", "kexec_load", "reboot", NULL,
};
static const char *const group_resources[] = {
    "ioprio_set", "mbind", "migrate_pages", "move_pages", "nice", "sched_setaffinity",
    "sched_setattr", "sched_setparam", "sched_setscheduler", "set_mempolicy",
    "set_mempolicy_home_node", "setpriority", "setrlimit", NULL,
};
static const char *const group_setuid[] = {
    "setgid", "setgid32", "setgroups", "setgroups32", "setregid", "setregid32", "setresgid",
    "setresgid32", "setresuid", "setresuid32", "setreuid", "setreuid32", "setuid", "setuid32",
    NULL,
};
static const char *const group_signal[] = {
    "rt_sigaction", "rt_sigpending", "rt_sigprocmask", "rt_sigsuspend", "rt_sigtimedwait",
    "rt_sigtimedwait_time64", "sigaction", "sigaltstack", "signal", "signalfd", "signalfd4",
    "sigpending", "sigprocmask", "sigsuspend", NULL,
};
static const char *const group_swap[] = {
    "swapoff", "swapon", NULL,
};
static const char *const group_sync[] = {
    "fdatasync", "fsync", "msync", "sync", "sync_file_range", "sync_file_range2", "syncfs", NULL,
};
static const char *const group_system_service[] = {
    "@aio", "@basic-io", "@chown", "@default", "@file-system", "@io-event", "@ipc", "@keyring",
    "@memlock", "@network-io", "@process", "@resources", "@setuid", "@signal", "@sync", "@timer",
    "arm_fadvise64_64", "capget", "capset", "copy_file_range", "fadvise64", "fadvise64_64",
    "flock", "get_mempolicy", "getcpu", "getpriority", "ioctl", "ioprio_get", "kcmp", "madvise",
    "mremap", "name_to_handle_at", "oldolduname", "olduname", "personality", "readahead",
    "readdir", "remap_file_pages", "sched_get_priority_max", "sched_get_priority_min",
    "sched_getattr", "sched_getparam", "sched_getscheduler", "sched_rr_get_interval",
    "sched_rr_get_interval_time64", "sched_yield", "sendfile", "sendfile64", "setfsgid",
    "setfsgid32", "setfsuid", "setfsuid32", "setpgid", "setsid", "splice", "sysinfo", "tee",
    "umask", "uname", "userfaultfd", "vmsplice", NULL,
};
static const char *const group_timer[] = {
    "alarm", "getitimer", "setitimer", "timer_create", "timer_delete", "timer_getoverrun",
    "timer_gettime", "timer_gettime64", "timer_settime", "timer_settime64", "timerfd_create",
    "timerfd_gettime", "timerfd_gettime64", "timerfd_settime", "timerfd_settime64", "times", NULL,
};
/* clang-format on */

static const cg_seccomp_group groups[] = {
    {"@default", "System calls that are always permitted", group_default},
    {"@aio", "Asynchronous IO", group_aio},
    {"@basic-io", "Basic IO", group_basic_io},
    {"@chown", "Change ownership of files and directories", group_chown},
    {"@clock", "Change the system time", group_clock},
    {"@cpu-emulation", "System calls for CPU emulation functionality", group_cpu_emulation},
    {"@debug", "Debugging, performance monitoring and tracing functionality", group_debug},
    {"@file-system", "File system operations", group_file_system},
    {"@io-event", "Event loop system calls", group_io_event},
    {"@ipc", "SysV IPC, POSIX Message Queues or other IPC", group_ipc},
    {"@keyring", "Kernel keyring access", group_keyring},
    {"@memlock", "Memory locking control", group_memlock},
    {"@module", "Loading and unloading of kernel modules", group_module},
    {"@mount", "Mounting and unmounting of file systems", group_mount},
    {"@network-io", "Network or Unix socket IO, should not be needed if not network facing",
     group_network_io},
    {"@obsolete", "Unusual, obsolete or unimplemented system calls", group_obsolete},
    {"@pkey", "System calls used for memory protection keys", group_pkey},
    {"@privileged", "All system calls which need super-user capabilities", group_privileged},
    {"@process", "Process control, execution, namespacing operations", group_process},
    {"@raw-io", "Raw I/O port access", group_raw_io},
    {"@reboot", "Reboot and reboot preparation/kexec", group_reboot},
    {"@resources", "Alter resource settings", group_resources},
    {"@setuid", "Operations for changing user/group credentials", group_setuid},
    {"@signal", "Process signal handling", group_signal},
    {"@swap", "Enable/disable swap devices", group_swap},
    {"@sync", "Synchronize files and memory to storage", group_sync},
    {"@system-service", "General system service operations", group_system_service},
    {"@timer", "Schedule operations by time", group_timer},
};

const cg_seccomp_group *cg_seccomp_group_find(const char *name)
{
    for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++)
        if (strcmp(groups[i].name, name) == 0)
            return &groups[i];
    return NULL;
}
