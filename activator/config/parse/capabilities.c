#include "activator/config/parse/capabilities.h"

#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/cleanup.h"
#include "common/split-argv.h"
#include "common/strv.h"
#include "common/text.h"

#define CAPABILITY(name) [name] = #name
/* Every capability the kernel headers of this build name, by number. */
static const char *const names[] = {
    CAPABILITY(CAP_CHOWN),
    CAPABILITY(CAP_DAC_OVERRIDE),
    CAPABILITY(CAP_DAC_READ_SEARCH),
    CAPABILITY(CAP_FOWNER),
    CAPABILITY(CAP_FSETID),
    CAPABILITY(CAP_KILL),
    CAPABILITY(CAP_SETGID),
    CAPABILITY(CAP_SETUID),
    CAPABILITY(CAP_SETPCAP),
    CAPABILITY(CAP_LINUX_IMMUTABLE),
    CAPABILITY(CAP_NET_BIND_SERVICE),
    CAPABILITY(CAP_NET_BROADCAST),
    CAPABILITY(CAP_NET_ADMIN),
    CAPABILITY(CAP_NET_RAW),
    CAPABILITY(CAP_IPC_LOCK),
    CAPABILITY(CAP_IPC_OWNER),
    CAPABILITY(CAP_SYS_MODULE),
    CAPABILITY(CAP_SYS_RAWIO),
    CAPABILITY(CAP_SYS_CHROOT),
    CAPABILITY(CAP_SYS_PTRACE),
    CAPABILITY(CAP_SYS_PACCT),
    CAPABILITY(CAP_SYS_ADMIN),
    CAPABILITY(CAP_SYS_BOOT),
    CAPABILITY(CAP_SYS_NICE),
    CAPABILITY(CAP_SYS_RESOURCE),
    CAPABILITY(CAP_SYS_TIME),
    CAPABILITY(CAP_SYS_TTY_CONFIG),
    CAPABILITY(CAP_MKNOD),
    CAPABILITY(CAP_LEASE),
    CAPABILITY(CAP_AUDIT_WRITE),
    CAPABILITY(CAP_AUDIT_CONTROL),
    CAPABILITY(CAP_SETFCAP),
    CAPABILITY(CAP_MAC_OVERRIDE),
    CAPABILITY(CAP_MAC_ADMIN),
    CAPABILITY(CAP_SYSLOG),
    CAPABILITY(CAP_WAKE_ALARM),
    CAPABILITY(CAP_BLOCK_SUSPEND),
    CAPABILITY(CAP_AUDIT_READ),
    CAPABILITY(CAP_PERFMON),
    CAPABILITY(CAP_BPF),
    CAPABILITY(CAP_CHECKPOINT_RESTORE),
};
#undef CAPABILITY

#define N_NAMES (sizeof(names) / sizeof(names[0]))
_Static_assert(N_NAMES <= 64, "capabilities are kept in a 64-bit mask");

static int find(const char *name)
{
    for (size_t i = 0; i < N_NAMES; i++)
        if (names[i] && strcasecmp(names[i], name) == 0)
            return (int)i;
    return -1;
}

int cfg_parse_capabilities(const char *text, uint64_t *mask, act_error *err)
{
    _cleanup_(act_strv_freep) char **words = NULL;
    int r = act_split_argv(text, &words, err);
    if (r < 0)
        return r;
    if (!words[0]) {
        *mask = 0;
        return 0;
    }
    bool invert = words[0][0] == '~';
    uint64_t line = 0;
    for (size_t i = 0; words[i]; i++) {
        const char *name = words[i] + (i == 0 && invert ? 1 : 0);
        if (!name[0])
            continue;
        int cap = find(name);
        if (cap < 0) {
            char shown[ACT_TEXT_SHOW_MAX];
            return act_error_set(err, EINVAL,
                                 "\"%s\" is not a capability (use names as in capabilities(7), "
                                 "e.g. CAP_NET_BIND_SERVICE, separated by spaces)",
                                 act_text_show(name, shown, sizeof(shown)));
        }
        line |= 1ULL << cap;
    }
    uint64_t known = N_NAMES == 64 ? ~0ULL : (1ULL << N_NAMES) - 1;
    *mask |= invert ? known & ~line : line;
    return 0;
}

void cfg_format_capabilities(uint64_t mask, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < N_NAMES && used < size; i++)
        if ((mask & (1ULL << i)) && names[i])
            used += (size_t)snprintf(out + used, size - used, "%s%s", used ? " " : "", names[i]);
}
