#include "activator/ctl/move.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "activator/control/ops.h"
#include "activator/control/request.h"
#include "activator/ctl/fleet_reply.h"
#include "activator/ctl/render.h"
#include "common/cleanup_json.h"
#include "common/clock.h"
#include "common/json_fields.h"

/* The longest one wait for the claim's next write asks for: a daemon
 * holds few waits at once, and a short one ends soon when this process
 * does. */
#define WAIT_CHUNK_SEC 30
/* When the box holds its most waits (busy) or does not know claim.wait,
 * how long a round pauses before it reads the claim instead. */
#define BUSY_PAUSE_NSEC (250 * 1000 * 1000L)

/* The host's claim once it is written after revision, or as it is after
 * wait_sec: CTL_EXIT_OK with *claim_out (owned by *reply). The daemon (or
 * the store) watches the claim, so each phase shows as it is written. */
static int next_claim(const ctl_options *options, const ctl_move_args *args, ctl_move_call_fn call,
                      uint64_t revision, int wait_sec, json_object **reply, json_object **claim_out)
{
    *claim_out = NULL;
    json_object *request = ctl_fleet_request(ctrl_op_name(CTRL_OP_CLAIM_WAIT), args->host);
    json_object_object_add(request, "revision", json_object_new_int64((int64_t)revision));
    json_object_object_add(request, "wait", json_object_new_int(wait_sec));
    int r = call(options, "move", request, reply);
    if (!*reply)
        return r;
    json_object *error = act_json_find(*reply, "error", json_type_object);
    const char *refusal = ctl_json_str_at(error, "code", NULL);
    if (strcmp(refusal, "busy") == 0 || strcmp(refusal, CTRL_REQ_UNKNOWN_OP) == 0) {
        /* The box holds as many waits as it takes, or is older than
         * claim.wait: this round reads the claim after a pause instead. */
        json_object_put(*reply);
        *reply = NULL;
        nanosleep(&(struct timespec){.tv_nsec = BUSY_PAUSE_NSEC}, NULL);
        r = call(options, "move", ctl_fleet_request(ctrl_op_name(CTRL_OP_CLAIM_SHOW), args->host),
                 reply);
        if (!*reply)
            return r;
    }
    const char *code = "";
    json_object *result = ctl_fleet_result(*reply, "move", &code);
    if (!result || !json_object_object_get_ex(result, "claim", claim_out))
        return r != CTL_EXIT_OK ? r : CTL_EXIT_FAILED;
    return r;
}

static void print_phase(const ctl_options *options, uint64_t started, json_object *c)
{
    char elapsed[32], details[320] = "";
    ctl_format_duration(act_now_usec() - started, elapsed, sizeof(elapsed));
    const char *phase = ctl_json_str_at(c, "op", "phase"), *exec = ctl_json_str_at(c, "op", "exec");
    const char *checkpoint = ctl_json_str_at(c, "state", "checkpoint");
    if (strcmp(phase, "draining") == 0)
        snprintf(details, sizeof(details), "%s retires it and writes a checkpoint", exec);
    else if (strcmp(phase, "moving") == 0 || strcmp(phase, "probing") == 0) {
        char size[32] = "";
        if (ctl_json_u64_at(c, "state", "size"))
            ctl_format_size(ctl_json_u64_at(c, "state", "size"), size, sizeof(size));
        snprintf(details, sizeof(details), "%s %s, checkpoint %s%s%s%s", exec,
                 phase[0] == 'm' ? "restores and probes it" : "probes it",
                 checkpoint[0] ? checkpoint : "none (stateless)", size[0] ? " (" : "", size,
                 size[0] ? ")" : "");
    } else {
        snprintf(details, sizeof(details), "box %s, generation %llu", exec,
                 (unsigned long long)ctl_json_u64_at(c, "holder", "generation"));
    }
    printf("  %7s  %-9s %s\n", elapsed, phase, details);
    fflush(stdout);
}

/* The phases of a move that succeeds, in order: a phase passed between two
 * reads of the claim (two writes close together) is still shown, as
 * passed. */
static const char *const phase_order[] = {"draining", "moving", "probing", "serving"};
#define N_PHASES (sizeof(phase_order) / sizeof(phase_order[0]))

static int phase_index(const char *phase)
{
    for (size_t i = 0; i < N_PHASES; i++)
        if (strcmp(phase_order[i], phase) == 0)
            return (int)i;
    return -1;
}

static void print_passed(int from, int to)
{
    for (int i = from + 1; i < to; i++)
        printf("  %7s  %-9s passed between two reads of the claim\n", "", phase_order[i]);
}

static int abort_move(const ctl_options *options, const ctl_move_args *args,
                      ctl_move_call_fn call, const char *why)
{
    _cleanup_(json_object_putp) json_object *reply = NULL;
    int r = call(options, "move --abort",
                 ctl_fleet_request(ctrl_op_name(CTRL_OP_MOVE_ABORT), args->host), &reply);
    if (!reply)
        return r;
    const char *code = "";
    json_object *result = ctl_fleet_result(reply, "move --abort", &code);
    if (!result)
        return r != CTL_EXIT_OK ? r : CTL_EXIT_FAILED;
    json_object *c = NULL;
    json_object_object_get_ex(result, "claim", &c);
    printf("%s%s: move %s rolled back; box %s runs it again once what the target started is "
           "stopped (revision %llu)\n",
           why ? why : "", args->host, ctl_json_str_at(c, "op", "id"),
           ctl_json_str_at(c, "op", "exec"),
           (unsigned long long)ctl_json_u64_at(result, "revision", NULL));
    return r;
}

/* The move's end as the claim tells it: 0 done, 1 failed, -1 not yet. */
static int judge(const ctl_move_args *args, const char *id, json_object *c)
{
    const char *kind = ctl_json_str_at(c, "op", "kind"), *phase = ctl_json_str_at(c, "op", "phase");
    const char *exec = ctl_json_str_at(c, "op", "exec");
    if (strcmp(ctl_json_str_at(c, "op", "id"), id) != 0) {
        fprintf(stderr,
                "activatorctl: move: %s: the claim went on to op %s (%s/%s, box %s); "
                "move %s is over\n",
                args->host, ctl_json_str_at(c, "op", "id"), kind, phase, exec[0] ? exec : "none",
                id);
        return 1;
    }
    if (strcmp(kind, "move") == 0 || strcmp(kind, "probe") == 0)
        return -1;
    if (ctl_json_str_at(c, "failure", "phase")[0]) {
        fprintf(stderr,
                "activatorctl: move: %s: failed in phase %s%s%s: %s: %s; it runs on box %s "
                "again\n",
                args->host, ctl_json_str_at(c, "failure", "phase"),
                ctl_json_str_at(c, "failure", "box")[0] ? " on box " : "",
                ctl_json_str_at(c, "failure", "box"), ctl_json_str_at(c, "failure", "reason"),
                ctl_json_str_at(c, "failure", "message"), exec);
        return 1;
    }
    if (strcmp(exec, args->box) == 0 &&
        strcmp(ctl_json_str_at(c, "holder", "box"), args->box) == 0) {
        printf("%s: serves on box %s, generation %llu (%s)\n", args->host, args->box,
               (unsigned long long)ctl_json_u64_at(c, "holder", "generation"), phase);
        return 0;
    }
    if (strcmp(exec, args->box) != 0) {
        fprintf(stderr, "activatorctl: move: %s: the move ended without reaching box %s (%s/%s); "
                        "it runs on box %s\n",
                args->host, args->box, kind, phase, exec[0] ? exec : "none");
        return 1;
    }
    return -1;
}

static void print_started(const ctl_move_args *args, json_object *result, json_object *c)
{
    bool changed = act_json_bool_or(result, "changed", false);
    printf("%s: move %s from box %s to box %s %s\n", args->host, ctl_json_str_at(c, "op", "id"),
           ctl_json_str_at(c, "op", "from"), ctl_json_str_at(c, "op", "to"),
           changed ? "started" : "resumed");
    if (!args->force || !changed)
        return;
    const char *checkpoint = ctl_json_str_at(c, "state", "checkpoint");
    if (!checkpoint[0]) {
        printf("  --force: the claim names no checkpoint; %s starts with what its state "
               "directory holds (empty unless a checkpoint was restored there)\n",
               args->box);
        return;
    }
    char age[32] = "an unknown time";
    if (ctl_json_u64_at(result, "checkpoint_age_usec", NULL))
        ctl_format_duration(ctl_json_u64_at(result, "checkpoint_age_usec", NULL), age, sizeof(age));
    printf("  --force: from checkpoint %s, written %s ago by box %s (generation %llu); what "
           "the host wrote after it is lost\n",
           checkpoint, age,
           ctl_json_str_at(c, "state", "box")[0] ? ctl_json_str_at(c, "state", "box") : "?",
           (unsigned long long)ctl_json_u64_at(c, "state", "generation"));
}

int ctl_move_run(const ctl_options *options, const ctl_move_args *args, ctl_move_call_fn call)
{
    if (args->abort)
        return abort_move(options, args, call, NULL);
    json_object *request = ctl_fleet_request(ctrl_op_name(CTRL_OP_MOVE), args->host);
    json_object_object_add(request, "box", json_object_new_string(args->box));
    if (args->force)
        json_object_object_add(request, "force", json_object_new_boolean(true));
    _cleanup_(json_object_putp) json_object *reply = NULL;
    int r = call(options, "move", request, &reply);
    if (!reply)
        return r;
    const char *code = "";
    json_object *result = ctl_fleet_result(reply, "move", &code);
    if (!result)
        return r != CTL_EXIT_OK ? r : CTL_EXIT_FAILED;
    json_object *started = NULL;
    json_object_object_get_ex(result, "claim", &started);
    char id[80];
    snprintf(id, sizeof(id), "%s", ctl_json_str_at(started, "op", "id"));
    print_started(args, result, started);

    uint64_t begun = act_now_usec();
    uint64_t deadline = begun + (uint64_t)args->timeout_sec * 1000000ull;
    char last_phase[40];
    snprintf(last_phase, sizeof(last_phase), "%s", ctl_json_str_at(started, "op", "phase"));
    print_phase(options, begun, started);
    uint64_t seen = ctl_json_u64_at(started, "revision", NULL);
    for (;;) {
        _cleanup_(json_object_putp) json_object *read = NULL;
        json_object *c = NULL;
        uint64_t now = act_now_usec();
        uint64_t left_sec = deadline > now ? (deadline - now + 999999) / 1000000 : 1;
        int wait_sec = left_sec < WAIT_CHUNK_SEC ? (int)left_sec : WAIT_CHUNK_SEC;
        r = next_claim(options, args, call, seen, wait_sec, &read, &c);
        if (r != CTL_EXIT_OK)
            return r;
        seen = ctl_json_u64_at(c, "revision", NULL);
        const char *phase = ctl_json_str_at(c, "op", "phase");
        if (strcmp(phase, last_phase) != 0) {
            bool ours = strcmp(ctl_json_str_at(c, "op", "id"), id) == 0;
            if (ours && phase_index(last_phase) >= 0 && phase_index(phase) > 0)
                print_passed(phase_index(last_phase), phase_index(phase));
            print_phase(options, begun, c);
            snprintf(last_phase, sizeof(last_phase), "%s", phase);
        }
        int end = judge(args, id, c);
        if (end >= 0)
            return end == 0 ? CTL_EXIT_OK : CTL_EXIT_FAILED;
        if (act_now_usec() >= deadline) {
            char why[160];
            snprintf(why, sizeof(why), "move: %s: not done within %d s (phase %s); ", args->host,
                     args->timeout_sec, phase);
            int aborted = abort_move(options, args, call, why);
            return aborted == CTL_EXIT_UNREACHABLE ? aborted : CTL_EXIT_FAILED;
        }
    }
}
