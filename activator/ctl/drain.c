#include "activator/ctl/drain.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activator/control/ops.h"
#include "activator/ctl/fleet_reply.h"
#include "activator/ctl/render.h"
#include "common/cleanup.h"
#include "common/cleanup_json.h"
#include "common/clock.h"
#include "common/json_fields.h"

/* One move, like the move command's default: a drain of the source
 * (StopTimeoutSec= and a checkpoint), a restore and a probe. */
#define MOVE_TIMEOUT_USEC (300 * 1000000ull)
/* How long one round waits for the first move in flight to change before
 * it reads the others: a round ends sooner when that claim is written. */
#define ROUND_WAIT_SEC 1
/* The boxes one host may be tried on before the drain gives it up. */
#define TARGETS_TRIED_MAX 8
/* Listings of the box's hosts: a host that reaches the box while it drains
 * (a move rolled back to it) is picked up by the next one. */
#define PASSES_MAX 3

typedef enum drain_step {
    STEP_WAITING, /* to be moved */
    STEP_MOVING,  /* its move is in flight */
    STEP_DONE,    /* runs elsewhere */
    STEP_FAILED,  /* given up: why says why */
} drain_step;

typedef struct drain_host {
    char host[65];
    drain_step step;
    char to[65];       /* the box its move goes to */
    char op_id[80];    /* that move's op */
    char phase[32];    /* the last phase printed */
    uint64_t revision; /* of the claim as last read */
    uint64_t started_usec;
    char tried[TARGETS_TRIED_MAX][65]; /* boxes its moves failed on */
    size_t n_tried;
    char why[320];
} drain_host;

typedef struct target {
    char box[65];
    uint64_t load; /* hosts it runs, and the moves this drain sent it */
} target;

typedef struct drain {
    const ctl_options *options;
    const ctl_drain_args *args;
    ctl_move_call_fn call;
    uint64_t begun_usec;
    drain_host *hosts;
    size_t n_hosts;
    target *targets;
    size_t n_targets;
} drain;

static void drain_free(drain *d)
{
    free(d->hosts);
    free(d->targets);
}

static void elapsed(const drain *d, char *out, size_t size)
{
    ctl_format_duration(act_now_usec() - d->begun_usec, out, size);
}

/* Sends request (taken) and returns its result (owned by *reply), or NULL
 * after the refusal was printed with *code, or with *exit set when nothing
 * answered. */
static json_object *ask(drain *d, const char *what, json_object *request, json_object **reply,
                        const char **code, int *exit_code)
{
    *code = "";
    *exit_code = d->call(d->options, what, request, reply);
    if (!*reply)
        return NULL;
    return ctl_fleet_result(*reply, what, code);
}

/* ---- the box's hosts and the boxes they may go to --------------------------- */

static drain_host *find_host(drain *d, const char *host)
{
    for (size_t i = 0; i < d->n_hosts; i++)
        if (strcmp(d->hosts[i].host, host) == 0)
            return &d->hosts[i];
    return NULL;
}

/* Adds every host the claims say the box runs that is not listed yet (or
 * was moved and came back); returns how many were added, or -1. */
static int list_hosts(drain *d, int *exit_code)
{
    _cleanup_(json_object_putp) json_object *reply = NULL;
    const char *code;
    json_object *result =
        ask(d, "drain: claims", ctl_fleet_request(ctrl_op_name(CTRL_OP_CLAIMS), NULL), &reply,
            &code, exit_code);
    if (!result)
        return -1;
    json_object *claims = json_object_object_get(result, "claims");
    int added = 0;
    for (size_t i = 0; i < json_object_array_length(claims); i++) {
        json_object *row = json_object_array_get_idx(claims, i);
        const char *host = ctl_json_str_at(row, "host", NULL);
        if (strcmp(ctl_json_str_at(row, "box", NULL), d->args->box) != 0 || !host[0])
            continue;
        drain_host *known = find_host(d, host);
        if (known && known->step != STEP_DONE)
            continue;
        if (!known) {
            drain_host *grown = realloc(d->hosts, (d->n_hosts + 1) * sizeof(*grown));
            if (!grown) {
                fprintf(stderr, "activatorctl: drain: out of memory\n");
                return -1;
            }
            d->hosts = grown;
            known = &d->hosts[d->n_hosts++];
        }
        *known = (drain_host){.step = STEP_WAITING};
        snprintf(known->host, sizeof(known->host), "%s", host);
        added++;
    }
    return added;
}

/* The boxes hosts may go to: live, not drained, not the box itself, each
 * with the hosts it runs. */
static int list_targets(drain *d, int *exit_code)
{
    _cleanup_(json_object_putp) json_object *reply = NULL;
    const char *code;
    json_object *result =
        ask(d, "drain: boxes", ctl_fleet_request(ctrl_op_name(CTRL_OP_BOXES), NULL), &reply, &code,
            exit_code);
    if (!result)
        return -1;
    json_object *boxes = json_object_object_get(result, "boxes");
    size_t n = json_object_array_length(boxes);
    free(d->targets);
    d->n_targets = 0;
    d->targets = calloc(n ? n : 1, sizeof(*d->targets));
    if (!d->targets) {
        fprintf(stderr, "activatorctl: drain: out of memory\n");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        json_object *row = json_object_array_get_idx(boxes, i);
        const char *box = ctl_json_str_at(row, "box", NULL);
        if (!act_json_bool_or(row, "live", false) || ctl_json_u64_at(row, "drained_usec", NULL) ||
            strcmp(box, d->args->box) == 0)
            continue;
        target *t = &d->targets[d->n_targets++];
        snprintf(t->box, sizeof(t->box), "%s", box);
        t->load = ctl_json_u64_at(row, "hosts", NULL);
    }
    return 0;
}

static bool tried(const drain_host *h, const char *box)
{
    for (size_t i = 0; i < h->n_tried; i++)
        if (strcmp(h->tried[i], box) == 0)
            return true;
    return false;
}

static void note_tried(drain_host *h, const char *box)
{
    if (h->n_tried < TARGETS_TRIED_MAX && !tried(h, box))
        snprintf(h->tried[h->n_tried++], sizeof(h->tried[0]), "%s", box);
}

/* The least loaded box h has not failed on yet, or NULL: the hosts spread
 * over the boxes rather than all landing on the first. */
static target *pick_target(drain *d, const drain_host *h)
{
    target *best = NULL;
    for (size_t i = 0; i < d->n_targets; i++)
        if (!tried(h, d->targets[i].box) && (!best || d->targets[i].load < best->load))
            best = &d->targets[i];
    return best;
}

static void give_up(drain *d, drain_host *h, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void give_up(drain *d, drain_host *h, const char *fmt, ...)
{
    h->step = STEP_FAILED;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->why, sizeof(h->why), fmt, ap);
    va_end(ap);
    char at[32];
    elapsed(d, at, sizeof(at));
    printf("  %7s  %s: not moved: %s\n", at, h->host, h->why);
    fflush(stdout);
}

/* ---- one move ------------------------------------------------------------------ */

/* Refusals that are the target's: the host may still go to another box. */
static bool target_refused(const char *code)
{
    return strcmp(code, "box_not_live") == 0 || strcmp(code, "box_drained") == 0 ||
           strcmp(code, "unknown_box") == 0;
}

static int start_move(drain *d, drain_host *h)
{
    target *t = pick_target(d, h);
    if (!t) {
        give_up(d, h, "%s",
                h->n_tried ? "every box it could go to refused it or failed its probe"
                           : "no live box that is not drained is left to take it");
        return 0;
    }
    json_object *request = ctl_fleet_request(ctrl_op_name(CTRL_OP_MOVE), h->host);
    json_object_object_add(request, "box", json_object_new_string(t->box));
    _cleanup_(json_object_putp) json_object *reply = NULL;
    const char *code;
    int exit_code;
    json_object *result = ask(d, h->host, request, &reply, &code, &exit_code);
    if (!reply)
        return exit_code;
    if (!result) {
        if (target_refused(code)) {
            note_tried(h, t->box);
            return 0; /* the next round tries another box */
        }
        json_object *error = json_object_object_get(reply, "error");
        give_up(d, h, "%s", ctl_json_str_at(error, "message", NULL));
        return 0;
    }
    json_object *c = json_object_object_get(result, "claim");
    h->step = STEP_MOVING;
    h->started_usec = act_now_usec();
    h->revision = ctl_json_u64_at(c, "revision", NULL);
    snprintf(h->to, sizeof(h->to), "%s", t->box);
    snprintf(h->op_id, sizeof(h->op_id), "%s", ctl_json_str_at(c, "op", "id"));
    snprintf(h->phase, sizeof(h->phase), "%s", ctl_json_str_at(c, "op", "phase"));
    t->load++;
    char at[32];
    elapsed(d, at, sizeof(at));
    printf("  %7s  %s: move %s to box %s started (%s)\n", at, h->host, h->op_id, t->box, h->phase);
    fflush(stdout);
    return 0;
}

/* The move's end as the claim c tells it, as the move command judges it. */
static void judge(drain *d, drain_host *h, json_object *c)
{
    char at[32];
    elapsed(d, at, sizeof(at));
    const char *kind = ctl_json_str_at(c, "op", "kind"), *phase = ctl_json_str_at(c, "op", "phase");
    const char *exec = ctl_json_str_at(c, "op", "exec");
    h->revision = ctl_json_u64_at(c, "revision", NULL);
    bool ours = strcmp(ctl_json_str_at(c, "op", "id"), h->op_id) == 0;
    if (ours && (strcmp(kind, "move") == 0 || strcmp(kind, "probe") == 0)) {
        if (strcmp(phase, h->phase) != 0) {
            snprintf(h->phase, sizeof(h->phase), "%s", phase);
            printf("  %7s  %s: %s\n", at, h->host, phase);
            fflush(stdout);
        }
        return;
    }
    const char *failed_in = ctl_json_str_at(c, "failure", "phase");
    if (ours && failed_in[0]) {
        /* Rolled back to this box: another box may take it. */
        printf("  %7s  %s: move to box %s failed in phase %s: %s: %s; trying another box\n", at,
               h->host, h->to, failed_in, ctl_json_str_at(c, "failure", "reason"),
               ctl_json_str_at(c, "failure", "message"));
        note_tried(h, h->to);
        h->step = STEP_WAITING;
        return;
    }
    if (strcmp(exec, d->args->box) != 0) {
        char took[32];
        ctl_format_duration(act_now_usec() - h->started_usec, took, sizeof(took));
        if (strcmp(exec, h->to) == 0 && strcmp(ctl_json_str_at(c, "holder", "box"), h->to) == 0)
            printf("  %7s  %s: serves on box %s, generation %llu (%s, moved in %s)\n", at, h->host,
                   h->to, (unsigned long long)ctl_json_u64_at(c, "holder", "generation"), phase,
                   took);
        else if (!ours)
            printf("  %7s  %s: the claim went on to op %s (%s/%s, box %s): it left box %s\n", at,
                   h->host, ctl_json_str_at(c, "op", "id"), kind, phase, exec[0] ? exec : "none",
                   d->args->box);
        else
            return; /* on its way to the target */
        h->step = STEP_DONE;
        fflush(stdout);
        return;
    }
    if (!ours) {
        /* Someone else's op put it back on this box. */
        note_tried(h, h->to);
        h->step = STEP_WAITING;
    }
}

/* Reads h's claim (after waiting up to wait_sec for its next write) and
 * judges it. */
static int follow(drain *d, drain_host *h, int wait_sec)
{
    json_object *request = ctl_fleet_request(
        ctrl_op_name(wait_sec ? CTRL_OP_CLAIM_WAIT : CTRL_OP_CLAIM_SHOW), h->host);
    if (wait_sec) {
        json_object_object_add(request, "revision", json_object_new_int64((int64_t)h->revision));
        json_object_object_add(request, "wait", json_object_new_int(wait_sec));
    }
    _cleanup_(json_object_putp) json_object *reply = NULL;
    const char *code;
    int exit_code;
    json_object *result = ask(d, h->host, request, &reply, &code, &exit_code);
    if (!reply)
        return exit_code;
    json_object *c = result ? json_object_object_get(result, "claim") : NULL;
    if (c)
        judge(d, h, c);
    else if (result == NULL && strcmp(code, "busy") != 0)
        give_up(d, h, "its claim cannot be read: %s", code);
    return CTL_EXIT_OK;
}

static void abort_move(drain *d, drain_host *h, const char *why)
{
    _cleanup_(json_object_putp) json_object *reply = NULL;
    const char *code;
    int exit_code;
    ask(d, h->host, ctl_fleet_request(ctrl_op_name(CTRL_OP_MOVE_ABORT), h->host), &reply, &code,
        &exit_code);
    give_up(d, h, "%s; its move was rolled back", why);
}

/* ---- the drain ----------------------------------------------------------------- */

static size_t count(const drain *d, drain_step step)
{
    size_t n = 0;
    for (size_t i = 0; i < d->n_hosts; i++)
        n += d->hosts[i].step == step;
    return n;
}

/* Moves what is listed until each host is done or given up. */
static int run_moves(drain *d)
{
    for (;;) {
        uint64_t now = act_now_usec();
        bool past_deadline =
            d->args->deadline_usec && now - d->begun_usec >= d->args->deadline_usec;
        drain_host *first_moving = NULL;
        for (size_t i = 0; i < d->n_hosts; i++) {
            drain_host *h = &d->hosts[i];
            if (h->step != STEP_MOVING)
                continue;
            if (past_deadline)
                abort_move(d, h, "the drain's --deadline ran out");
            else if (now - h->started_usec >= MOVE_TIMEOUT_USEC)
                abort_move(d, h, "its move was not done within 300 s");
            else if (!first_moving)
                first_moving = h;
        }
        if (past_deadline) {
            for (size_t i = 0; i < d->n_hosts; i++)
                if (d->hosts[i].step == STEP_WAITING)
                    give_up(d, &d->hosts[i], "%s", "the drain's --deadline ran out");
            return CTL_EXIT_OK;
        }
        size_t in_flight = count(d, STEP_MOVING);
        for (size_t i = 0; i < d->n_hosts && in_flight < d->args->parallel; i++) {
            if (d->hosts[i].step != STEP_WAITING)
                continue;
            int r = start_move(d, &d->hosts[i]);
            if (r != CTL_EXIT_OK)
                return r;
            in_flight += d->hosts[i].step == STEP_MOVING;
        }
        if (!count(d, STEP_MOVING) && !count(d, STEP_WAITING))
            return CTL_EXIT_OK;
        /* The first move's next write paces the round; the others are
         * read as they are. */
        for (size_t i = 0; i < d->n_hosts; i++) {
            drain_host *h = &d->hosts[i];
            if (h->step != STEP_MOVING)
                continue;
            int r = follow(d, h, h == first_moving ? ROUND_WAIT_SEC : 0);
            if (r != CTL_EXIT_OK)
                return r;
        }
    }
}

static int mark(const ctl_options *options, const char *box, ctrl_op op, ctl_move_call_fn call,
                json_object **reply, json_object **result)
{
    json_object *request = ctl_fleet_request(ctrl_op_name(op), NULL);
    json_object_object_add(request, "box", json_object_new_string(box));
    int r = call(options, op == CTRL_OP_BOX_DRAIN ? "drain" : "undrain", request, reply);
    if (!*reply)
        return r;
    const char *code = "";
    *result = ctl_fleet_result(*reply, op == CTRL_OP_BOX_DRAIN ? "drain" : "undrain", &code);
    return *result ? r : r != CTL_EXIT_OK ? r : CTL_EXIT_FAILED;
}

int ctl_drain_run(const ctl_options *options, const ctl_drain_args *args, ctl_move_call_fn call)
{
    _cleanup_(json_object_putp) json_object *reply = NULL;
    json_object *result = NULL;
    int r = mark(options, args->box, CTRL_OP_BOX_DRAIN, call, &reply, &result);
    if (!result)
        return r;
    _cleanup_(drain_free)
        drain d = {.options = options, .args = args, .call = call, .begun_usec = act_now_usec()};
    char since[40] = "now";
    uint64_t drained = ctl_json_u64_at(result, "drained_usec", NULL), wall = act_wallclock_usec();
    if (drained && drained + 1000000 < wall) {
        char ago[32];
        ctl_format_duration(wall - drained, ago, sizeof(ago));
        snprintf(since, sizeof(since), "%s ago", ago);
    }
    printf("box %s is drained (since %s): no host is assigned or moved to it any more\n", args->box,
           since);
    fflush(stdout);
    for (unsigned pass = 0; pass < PASSES_MAX; pass++) {
        int added = list_hosts(&d, &r);
        if (added < 0)
            return r != CTL_EXIT_OK ? r : CTL_EXIT_FAILED;
        if (added == 0)
            break;
        if (list_targets(&d, &r) < 0)
            return r != CTL_EXIT_OK ? r : CTL_EXIT_FAILED;
        printf("%d host%s to move, %u at a time, to %zu box%s:", added, added == 1 ? "" : "s",
               args->parallel, d.n_targets, d.n_targets == 1 ? "" : "es");
        for (size_t i = 0; i < d.n_targets; i++)
            printf(" %s", d.targets[i].box);
        printf("\n");
        fflush(stdout);
        if ((r = run_moves(&d)) != CTL_EXIT_OK)
            return r;
        if (args->deadline_usec && act_now_usec() - d.begun_usec >= args->deadline_usec)
            break;
    }
    size_t failed = count(&d, STEP_FAILED), moved = count(&d, STEP_DONE);
    char took[32];
    elapsed(&d, took, sizeof(took));
    if (!failed) {
        printf("box %s: %zu host%s moved in %s; it runs no host and stays drained until "
               "'activatorctl undrain %s'\n",
               args->box, moved, moved == 1 ? "" : "s", took, args->box);
        return CTL_EXIT_OK;
    }
    fprintf(stderr, "activatorctl: drain: box %s still runs %zu host%s (%zu moved in %s):\n",
            args->box, failed, failed == 1 ? "" : "s", moved, took);
    for (size_t i = 0; i < d.n_hosts; i++)
        if (d.hosts[i].step == STEP_FAILED)
            fprintf(stderr, "  %s: %s\n", d.hosts[i].host, d.hosts[i].why);
    fprintf(stderr,
            "run 'activatorctl drain %s' again once that is dealt with (it stays drained)\n",
            args->box);
    return CTL_EXIT_FAILED;
}

int ctl_undrain_run(const ctl_options *options, const char *box, ctl_move_call_fn call)
{
    _cleanup_(json_object_putp) json_object *reply = NULL;
    json_object *result = NULL;
    int r = mark(options, box, CTRL_OP_BOX_UNDRAIN, call, &reply, &result);
    if (result)
        printf("box %s is no longer drained: it may be given hosts again\n", box);
    return r;
}
