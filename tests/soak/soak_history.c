/* What the soak saw of each host lately, so that a break's report says
 * enough to find its cause without a second run: every box's events for
 * the host (from the soak's subscribers), the claim's revisions (as the
 * router read them), the populated leaves on every box (as the sampler
 * read them, on each change), and, at the report, the leaves as they are. */
#include "soak.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/cleanup.h"

static void history_add_v(soak *s, soak_history *history, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
static void history_add_v(soak *s, soak_history *history, const char *fmt, va_list ap)
{
    pthread_mutex_lock(&s->history_lock);
    soak_seen *line = &history->lines[history->added++ % SOAK_HISTORY];
    line->at_ms = soak_now_ms();
    vsnprintf(line->what, sizeof(line->what), fmt, ap);
    pthread_mutex_unlock(&s->history_lock);
}

void soak_history_add(soak *s, soak_history *history, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    history_add_v(s, history, fmt, ap);
    va_end(ap);
}

static soak_host *host_named(soak *s, const char *name)
{
    for (size_t i = 0; i < s->n_hosts; i++)
        if (strcmp(s->hosts[i].name, name) == 0)
            return &s->hosts[i];
    return NULL;
}

void soak_history_event(soak *s, size_t box, const dd_event *event)
{
    soak_host *h = host_named(s, event->host);
    if (!h)
        return;
    soak_history_add(s, &h->events[box], "#%" PRIu64 " %s g-%" PRIu64 "%s%s%s%s", event->seq,
                     event->name, event->generation, event->version[0] ? " " : "", event->version,
                     event->reason[0] ? " reason " : "", event->reason);
}

void soak_history_claim(soak *s, soak_host *h, const claim *c)
{
    if (c->revision == h->claim_revision_seen)
        return;
    h->claim_revision_seen = c->revision;
    const char *executor = claim_executor(c);
    soak_history_add(
        s, &h->claims, "revision %" PRIu64 ": holder %s g-%" PRIu64 ", executor %s, op %s phase %s",
        c->revision, c->holder.box[0] ? c->holder.box : "(none)", c->holder.generation,
        executor ? executor : "(none)", claim_op_kind_to_string(c->op.kind), c->op.phase);
}

void soak_history_leaves(soak *s, soak_host *h, size_t box, const char *leaves)
{
    if (strcmp(h->leaves_seen[box], leaves) == 0)
        return;
    snprintf(h->leaves_seen[box], sizeof(h->leaves_seen[box]), "%s", leaves);
    soak_history_add(s, &h->leaves[box], "populated: %s", leaves[0] ? leaves : "none");
}

static void print_history(soak *s, const char *title, const soak_history *history)
{
    pthread_mutex_lock(&s->history_lock);
    printf("    %s:%s\n", title, history->added ? "" : " nothing seen");
    unsigned first = history->added > SOAK_HISTORY ? history->added - SOAK_HISTORY : 0;
    for (unsigned i = first; i < history->added; i++) {
        const soak_seen *line = &history->lines[i % SOAK_HISTORY];
        /* Signed: the warm-up comes before the run's clock starts. */
        printf("      %+.3f s %s\n", ((double)line->at_ms - (double)s->start_ms) / 1000.0,
               line->what);
    }
    pthread_mutex_unlock(&s->history_lock);
}

/* Every leaf of h on box now, with the processes in it. */
static void print_leaves_now(soak *s, const soak_host *h, size_t box)
{
    char path[PATH_MAX + 80];
    snprintf(path, sizeof(path), "%s/hosts/%s", s->fleet.boxes[box].drv.cgroup_path, h->name);
    _cleanup_(closedirp) DIR *dir = opendir(path);
    printf("    leaves now:%s\n", dir ? "" : " none (the host has no cgroup on this box)");
    struct dirent *entry;
    while (dir && (entry = readdir(dir))) {
        if (entry->d_type != DT_DIR || entry->d_name[0] == '.')
            continue;
        char procs_path[2 * PATH_MAX];
        snprintf(procs_path, sizeof(procs_path), "%s/%s/cgroup.procs", path, entry->d_name);
        _cleanup_free_ char *procs = dd_read_text(procs_path);
        for (char *c = procs; c && *c; c++)
            if (*c == '\n')
                *c = ' ';
        printf("      %s: %s\n", entry->d_name, procs && procs[0] ? procs : "empty");
    }
}

void soak_history_print(soak *s, const soak_host *h)
{
    printf("soak: what the soak saw of host %s lately (times since the faults began):\n", h->name);
    print_history(s, "its claim, as the router read it", &h->claims);
    for (size_t b = 0; b < s->n_boxes; b++) {
        printf("  on %s:\n", fl_box_name(b));
        print_history(s, "events", &h->events[b]);
        print_history(s, "leaves, as the sampler read them", &h->leaves[b]);
        print_leaves_now(s, h, b);
    }
    fflush(stdout);
}
