#include "activator/config/parse-syscalls.h"

#include <errno.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/split-argv.h"
#include "common/text.h"

void cfg_syscall_filter_clear(cfg_syscall_filter *filter)
{
    act_strv_free(filter->deny);
    act_strv_free(filter->allow);
    *filter = (cfg_syscall_filter){0};
}

/* Appends name to *list (NULL-terminated, growing one at a time: lists here
 * are a handful of names). */
static int strv_append(char ***list, const char *name, act_error *err)
{
    size_t n = act_strv_length(*list);
    char **grown = realloc(*list, (n + 2) * sizeof(char *));
    if (!grown)
        return act_error_set(err, ENOMEM, "out of memory");
    *list = grown;
    grown[n] = strdup(name);
    grown[n + 1] = NULL;
    if (!grown[n])
        return act_error_set(err, ENOMEM, "out of memory");
    return 0;
}

int cfg_parse_syscall_filter(const char *text, cfg_syscall_filter *out, act_error *err)
{
    _cleanup_(act_strv_freep) char **words = NULL;
    int r = act_split_argv(text, &words, err);
    if (r < 0)
        return r;
    char shown[ACT_TEXT_SHOW_MAX];
    if (!words[0] || (strcmp(words[0], "default") != 0 && strcmp(words[0], "none") != 0))
        return act_error_set(err, EINVAL,
                             "\"%s\" does not start with default or none (write default, none, "
                             "then optionally ~name to deny more or name to allow one)",
                             act_text_show(text, shown, sizeof(shown)));

    _cleanup_(cfg_syscall_filter_clear) cfg_syscall_filter filter = {0};
    filter.base = strcmp(words[0], "none") == 0 ? CFG_SYSCALLS_NONE : CFG_SYSCALLS_DEFAULT;
    for (size_t i = 1; words[i]; i++) {
        bool deny = words[i][0] == '~';
        const char *name = words[i] + (deny ? 1 : 0);
        act_text_show(name, shown, sizeof(shown));
        if (name[0] == '@')
            return act_error_set(err, EINVAL,
                                 "%s is a systemd group name; groups are not supported (list the "
                                 "system calls by name)",
                                 shown);
        if (seccomp_syscall_resolve_name(name) == __NR_SCMP_ERROR)
            return act_error_set(err, EINVAL,
                                 "\"%s\" is not a system call on this machine (check the spelling, "
                                 "e.g. ptrace or io_uring_setup)",
                                 shown);
        if (!deny && filter.base == CFG_SYSCALLS_NONE)
            return act_error_set(
                err, EINVAL,
                "%s is allowed, but with none nothing is denied (drop the name, or "
                "start with default)",
                shown);
        r = strv_append(deny ? &filter.deny : &filter.allow, name, err);
        if (r < 0)
            return r;
    }
    cfg_syscall_filter_clear(out);
    *out = TAKE_STRUCT(filter);
    return 0;
}
