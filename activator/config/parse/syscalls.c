#include "activator/config/parse/syscalls.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cgroup/cgroup.h"
#include "common/cleanup.h"
#include "common/split-argv.h"
#include "common/strv.h"
#include "common/text.h"

void cfg_syscall_filter_clear(cfg_syscall_filter *filter)
{
    act_strv_free(filter->deny);
    act_strv_free(filter->allow);
    *filter = (cfg_syscall_filter){0};
}

static bool strv_contains(char *const *list, const char *name)
{
    for (size_t i = 0; list && list[i]; i++)
        if (strcmp(list[i], name) == 0)
            return true;
    return false;
}

/* Takes name out of *list, if there. */
static void strv_remove(char **list, const char *name)
{
    size_t n = act_strv_length(list);
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i], name) == 0) {
            free(list[i]);
            memmove(&list[i], &list[i + 1], (n - i) * sizeof(char *));
            return;
        }
}

/* Appends name to *list (NULL-terminated) unless it is there already. */
static int strv_add(char ***list, const char *name)
{
    if (strv_contains(*list, name))
        return 0;
    size_t n = act_strv_length(*list);
    char **grown = realloc(*list, (n + 2) * sizeof(char *));
    if (!grown)
        return -ENOMEM;
    *list = grown;
    grown[n] = strdup(name);
    grown[n + 1] = NULL;
    return grown[n] ? 0 : -ENOMEM;
}

/* What one name of a line does: into one list, out of the other. */
typedef struct line_target {
    char ***into;
    char **out_of;
} line_target;

static int add_call(const char *call, void *data)
{
    line_target *target = data;
    strv_remove(target->out_of, call);
    return strv_add(target->into, call);
}

static int apply_name(cfg_syscall_filter *filter, const char *name, bool deny, act_error *err)
{
    char shown[ACT_TEXT_SHOW_MAX];
    act_text_show(name, shown, sizeof(shown));
    if (strchr(name, ':'))
        return act_error_set(err, EINVAL,
                             "%s: a refusal's errno cannot be chosen here, every refused call "
                             "gets EPERM (drop the :ERRNO)",
                             shown);
    line_target target = deny ? (line_target){&filter->deny, filter->allow}
                              : (line_target){&filter->allow, filter->deny};
    int r = cg_seccomp_expand(name, add_call, &target);
    if (r == -ENOENT)
        return act_error_set(err, EINVAL,
                             "%s is not one of systemd's system call groups (systemd-analyze "
                             "syscall-filter lists them, e.g. @network-io, @mount)",
                             shown);
    if (r == -EINVAL)
        return act_error_set(err, EINVAL,
                             "\"%s\" is not a system call on this machine (check the spelling, "
                             "e.g. ptrace or io_uring_setup, or name a group such as @mount)",
                             shown);
    if (r < 0)
        return act_error_set(err, -r, "out of memory");
    return 0;
}

/* A line of names, all denied when it starts with ~. */
static int apply_line(cfg_syscall_filter *filter, char *const *words, act_error *err)
{
    bool deny = words[0][0] == '~';
    if (filter->reset) {
        filter->base = deny ? CFG_SYSCALLS_NONE : CFG_SYSCALLS_ALLOW;
        filter->reset = false;
    }
    for (size_t i = 0; words[i]; i++) {
        /* The ~ of the line, on the first name or on its own ("~ @mount"). */
        const char *name = words[i] + (i == 0 && deny ? 1 : 0);
        if (!name[0])
            continue;
        if (name[0] == '~') {
            char shown[ACT_TEXT_SHOW_MAX];
            return act_error_set(err, EINVAL,
                                 "%s: ~ goes once at the start of the line and makes the whole "
                                 "line a deny list (put denied names on a line of their own)",
                                 act_text_show(name, shown, sizeof(shown)));
        }
        int r = apply_name(filter, name, deny, err);
        if (r < 0)
            return r;
    }
    return 0;
}

static char **strv_copy(char *const *list)
{
    size_t n = act_strv_length(list);
    char **copy = calloc(n + 1, sizeof(char *));
    for (size_t i = 0; copy && i < n; i++)
        if (!(copy[i] = strdup(list[i]))) {
            act_strv_free(copy);
            return NULL;
        }
    return copy;
}

static int copy_filter(const cfg_syscall_filter *from, cfg_syscall_filter *to)
{
    *to = (cfg_syscall_filter){.base = from->base, .reset = from->reset};
    if ((from->allow && !(to->allow = strv_copy(from->allow))) ||
        (from->deny && !(to->deny = strv_copy(from->deny)))) {
        cfg_syscall_filter_clear(to);
        return -ENOMEM;
    }
    return 0;
}

int cfg_parse_syscall_filter(const char *text, cfg_syscall_filter *filter, act_error *err)
{
    _cleanup_(act_strv_freep) char **words = NULL;
    int r = act_split_argv(text, &words, err);
    if (r < 0)
        return r;
    /* The line is applied to a copy, so that a bad name changes nothing. */
    _cleanup_(cfg_syscall_filter_clear) cfg_syscall_filter next = {0};
    if (!words[0]) {
        next = (cfg_syscall_filter){.base = CFG_SYSCALLS_NONE, .reset = true};
    } else {
        if (copy_filter(filter, &next) < 0)
            return act_error_set(err, ENOMEM, "out of memory");
        r = apply_line(&next, words, err);
    }
    if (r < 0)
        return r;
    cfg_syscall_filter_clear(filter);
    *filter = TAKE_STRUCT(next);
    return 0;
}
