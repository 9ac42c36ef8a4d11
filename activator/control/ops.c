#include "activator/control/ops.h"

#include <stdio.h>
#include <string.h>

#include "common/cleanup.h"

/* Index i is ctrl_swap_mode i (activator/control/request.h). */
static const char *const swap_modes[] = {"overlap", "stop-first", NULL};

static const ctrl_field_spec fields[] = {
    {CTRL_FIELD_HOST, "host", CTRL_FIELD_KIND_NAME, NULL},
    {CTRL_FIELD_VERSION, "version", CTRL_FIELD_KIND_NAME, NULL},
    {CTRL_FIELD_BOX, "box", CTRL_FIELD_KIND_NAME, NULL},
    {CTRL_FIELD_PATH, "path", CTRL_FIELD_KIND_PATH, NULL},
    {CTRL_FIELD_MODE, "mode", CTRL_FIELD_KIND_CHOICE, swap_modes},
    {CTRL_FIELD_NO_WAIT, "no_wait", CTRL_FIELD_KIND_FLAG, NULL},
    {CTRL_FIELD_PROMOTE, "promote", CTRL_FIELD_KIND_FLAG, NULL},
    {CTRL_FIELD_FORCE, "force", CTRL_FIELD_KIND_FLAG, NULL},
    {CTRL_FIELD_KEEP, "keep", CTRL_FIELD_KIND_COUNT, NULL},
    {CTRL_FIELD_DRY_RUN, "dry_run", CTRL_FIELD_KIND_FLAG, NULL},
    {CTRL_FIELD_REVISION, "revision", CTRL_FIELD_KIND_REVISION, NULL},
    {CTRL_FIELD_WAIT, "wait", CTRL_FIELD_KIND_COUNT, NULL},
};

/* Short names for the table below. */
enum {
    HOST = CTRL_FIELD_HOST,
    VERSION = CTRL_FIELD_VERSION,
    BOX = CTRL_FIELD_BOX,
    PATH = CTRL_FIELD_PATH,
    MODE = CTRL_FIELD_MODE,
    NO_WAIT = CTRL_FIELD_NO_WAIT,
    PROMOTE = CTRL_FIELD_PROMOTE,
    FORCE = CTRL_FIELD_FORCE,
    KEEP = CTRL_FIELD_KEEP,
    DRY_RUN = CTRL_FIELD_DRY_RUN,
    REVISION = CTRL_FIELD_REVISION,
    WAIT = CTRL_FIELD_WAIT,
};

/* Staging is root's: the daemon reads PATH with its own privileges and staged
 * files are world-readable, so an operator could otherwise copy out any file
 * of the box. Operators wake, swap and promote the builds root has staged. */
static const ctrl_op_spec ops[CTRL_OP__COUNT] = {
    [CTRL_OP_STATUS] = {"status", 0, HOST, CTRL_ROLE_VIEWER,
                        "Show every host (or one) with state, generation and usage."},
    [CTRL_OP_WAKE] = {"wake", HOST, NO_WAIT, CTRL_ROLE_OPERATOR,
                      "Wake HOST and wait until it serves (or is refused), showing progress."},
    [CTRL_OP_PARK] = {"park", HOST, 0, CTRL_ROLE_OPERATOR,
                      "Retire HOST's generation now; its sockets are watched again."},
    [CTRL_OP_SWAP] = {"swap", HOST | VERSION, MODE | NO_WAIT, CTRL_ROLE_OPERATOR,
                      "Replace HOST's generation with one running VERSION, without refusing a "
                      "connection."},
    [CTRL_OP_STAGE] = {"stage", HOST | VERSION | PATH, PROMOTE, CTRL_ROLE_ROOT,
                       "Stage the build at PATH as HOST's VERSION (digest recorded in its "
                       "manifest)."},
    [CTRL_OP_PROMOTE] = {"promote", HOST | VERSION, 0, CTRL_ROLE_OPERATOR,
                         "Make a staged VERSION the live one for the next wake."},
    [CTRL_OP_RELEASES] = {"releases", HOST, 0, CTRL_ROLE_VIEWER,
                          "List HOST's staged versions; * marks the live one."},
    [CTRL_OP_CLAIM_SHOW] = {"claim.show", HOST, 0, CTRL_ROLE_VIEWER,
                            "Print HOST's claim: holder, op, pin, held, revision."},
    [CTRL_OP_CLAIM_WAIT] = {"claim.wait", HOST, REVISION | WAIT, CTRL_ROLE_VIEWER,
                            "Print HOST's claim once it is written after REVISION (0: once "
                            "there is one), waiting up to --wait seconds (30)."},
    [CTRL_OP_CLAIM_ASSIGN] = {"claim.assign", HOST | BOX, FORCE, CTRL_ROLE_OPERATOR,
                              "Name BOX as the box that runs HOST; --force for a box "
                              "without a live lease."},
    [CTRL_OP_CLAIM_RELEASE] = {"claim.release", HOST, 0, CTRL_ROLE_OPERATOR,
                               "Retire HOST here; no box wakes it until it is assigned again."},
    [CTRL_OP_CLAIMS] = {"claims", 0, 0, CTRL_ROLE_VIEWER,
                        "List every claim: host, box, phase, generation, session, version, "
                        "pin, held, age."},
    [CTRL_OP_BOXES] = {"boxes", 0, 0, CTRL_ROLE_VIEWER,
                       "List the boxes, live and dead, with their lease age and URLs, and which "
                       "hosts were taken over from each and where they went."},
    [CTRL_OP_HOLD] = {"hold", HOST | VERSION, 0, CTRL_ROLE_OPERATOR,
                      "Freeze HOST on VERSION: a wake that would run another build is refused."},
    [CTRL_OP_UNHOLD] = {"unhold", HOST, 0, CTRL_ROLE_OPERATOR,
                        "Lift HOST's hold: wakes run the pinned or live version again."},
    [CTRL_OP_UNPIN] = {"unpin", HOST, 0, CTRL_ROLE_OPERATOR,
                       "Drop HOST's pin: the next start runs the live version."},
    [CTRL_OP_MOVE] = {"move", HOST | BOX, FORCE, CTRL_ROLE_OPERATOR,
                      "Move HOST to BOX with its state: drain, checkpoint, probe there, serve; "
                      "--force when HOST's box is gone."},
    [CTRL_OP_MOVE_ABORT] = {"move.abort", HOST, 0, CTRL_ROLE_OPERATOR,
                            "Roll HOST's unfinished move back to the box it was leaving."},
    [CTRL_OP_STATS] = {"stats", 0, 0, CTRL_ROLE_VIEWER, "Show the daemon's counters."},
    [CTRL_OP_VERSION] = {"version", 0, 0, CTRL_ROLE_VIEWER,
                         "Show the versions of activatorctl and activatord."},
    [CTRL_OP_RELOAD] = {"reload", 0, 0, CTRL_ROLE_OPERATOR,
                        "Apply the configuration files again without a restart, and show what "
                        "changed."},
    [CTRL_OP_GC] = {"gc", HOST, KEEP | DRY_RUN, CTRL_ROLE_OPERATOR,
                    "Remove HOST's old staged versions, never one in use."},
    [CTRL_OP_CHECKPOINT] = {"checkpoint", HOST, 0, CTRL_ROLE_OPERATOR,
                            "Write a checkpoint of HOST's state and name it on its claim (the "
                            "built-in one parks HOST first)."},
    [CTRL_OP_CHECKPOINTS] = {"checkpoints", HOST, 0, CTRL_ROLE_VIEWER,
                             "List HOST's checkpoints, newest first; * marks the one its claim "
                             "names."},
    [CTRL_OP_FREEZE] = {"freeze", HOST, 0, CTRL_ROLE_OPERATOR,
                        "Freeze HOST's serving generation now (cgroup freezer); its next "
                        "connection thaws it."},
    [CTRL_OP_THAW] = {"thaw", HOST, 0, CTRL_ROLE_OPERATOR,
                      "Thaw HOST's frozen generation now; it serves and is watched for "
                      "idleness again."},
    [CTRL_OP_BOX_DRAIN] = {"box.drain", BOX, 0, CTRL_ROLE_OPERATOR,
                           "Mark BOX drained: no host is assigned or moved to it, nor claimed "
                           "by it, until it is undrained."},
    [CTRL_OP_BOX_UNDRAIN] = {"box.undrain", BOX, 0, CTRL_ROLE_OPERATOR,
                             "Lift BOX's drain mark: it may be given hosts again."},
};

const ctrl_op_spec *ctrl_op_spec_of(ctrl_op op)
{
    if ((unsigned)op >= CTRL_OP__COUNT)
        return NULL;
    return &ops[op];
}

const char *ctrl_op_name(ctrl_op op)
{
    const ctrl_op_spec *spec = ctrl_op_spec_of(op);
    return spec ? spec->name : NULL;
}

int ctrl_op_from_name(const char *name)
{
    for (size_t i = 0; i < CTRL_OP__COUNT; i++)
        if (strcmp(ops[i].name, name) == 0)
            return (int)i;
    return -1;
}

const ctrl_field_spec *ctrl_fields(size_t *n)
{
    *n = ARRAY_SIZE(fields);
    return fields;
}

const ctrl_field_spec *ctrl_field_spec_of(ctrl_field field)
{
    for (size_t i = 0; i < ARRAY_SIZE(fields); i++)
        if (fields[i].bit == field)
            return &fields[i];
    return NULL;
}

int ctrl_field_choice(const ctrl_field_spec *field, const char *value)
{
    for (size_t i = 0; field->choices && field->choices[i]; i++)
        if (strcmp(field->choices[i], value) == 0)
            return (int)i;
    return -1;
}

const char *ctrl_role_name(ctrl_role role)
{
    switch (role) {
    case CTRL_ROLE_VIEWER:
        return "viewer";
    case CTRL_ROLE_OPERATOR:
        return "operator";
    case CTRL_ROLE_ROOT:
        return "root";
    }
    return "unknown";
}

/* Appends item to out as one element of a list separated by sep. */
static void append_item(char *out, size_t size, size_t *used, const char *sep, const char *item)
{
    if (*used >= size)
        return;
    int n = snprintf(out + *used, size - *used, "%s%s", *used ? sep : "", item);
    if (n > 0)
        *used += (size_t)n;
}

void ctrl_fields_list(unsigned set, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < ARRAY_SIZE(fields); i++)
        if (set & fields[i].bit)
            append_item(out, size, &used, ", ", fields[i].name);
    if (used == 0)
        snprintf(out, size, "none");
}

void ctrl_field_choices_list(const ctrl_field_spec *field, const char *sep, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; field->choices && field->choices[i]; i++)
        append_item(out, size, &used, sep, field->choices[i]);
}

void ctrl_ops_list(char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < CTRL_OP__COUNT; i++)
        append_item(out, size, &used, ", ", ops[i].name);
}
