#include "activator/control/ops.h"

#include <stdio.h>
#include <string.h>

#include "common/cleanup.h"

/* Index i is ACT_SWAP_MODE i (activator/control/request.h). */
static const char *const swap_modes[] = {"overlap", "stop-first", NULL};

static const act_field_spec fields[] = {
    {ACT_FIELD_HOST, "host", ACT_FIELD_KIND_NAME, NULL},
    {ACT_FIELD_VERSION, "version", ACT_FIELD_KIND_NAME, NULL},
    {ACT_FIELD_BOX, "box", ACT_FIELD_KIND_NAME, NULL},
    {ACT_FIELD_PATH, "path", ACT_FIELD_KIND_PATH, NULL},
    {ACT_FIELD_MODE, "mode", ACT_FIELD_KIND_CHOICE, swap_modes},
    {ACT_FIELD_NO_WAIT, "no_wait", ACT_FIELD_KIND_FLAG, NULL},
    {ACT_FIELD_PROMOTE, "promote", ACT_FIELD_KIND_FLAG, NULL},
};

/* Short names for the table below. */
enum {
    HOST = ACT_FIELD_HOST,
    VERSION = ACT_FIELD_VERSION,
    BOX = ACT_FIELD_BOX,
    PATH = ACT_FIELD_PATH,
    MODE = ACT_FIELD_MODE,
    NO_WAIT = ACT_FIELD_NO_WAIT,
    PROMOTE = ACT_FIELD_PROMOTE,
};

/* Staging is root's: the daemon reads PATH with its own privileges and staged
 * files are world-readable, so an operator could otherwise copy out any file
 * of the box. Operators wake, swap and promote the builds root has staged. */
static const act_op_spec ops[ACT_OP__COUNT] = {
    [ACT_OP_STATUS] = {"status", 0, HOST, ACT_ROLE_VIEWER,
                       "Show every host (or one) with state, generation and usage."},
    [ACT_OP_WAKE] = {"wake", HOST, NO_WAIT, ACT_ROLE_OPERATOR,
                     "Wake HOST and wait until it serves (or is refused), showing progress."},
    [ACT_OP_PARK] = {"park", HOST, 0, ACT_ROLE_OPERATOR,
                     "Retire HOST's generation now; its sockets are watched again."},
    [ACT_OP_SWAP] = {"swap", HOST | VERSION, MODE | NO_WAIT, ACT_ROLE_OPERATOR,
                     "Replace HOST's generation with one running VERSION, without refusing a "
                     "connection."},
    [ACT_OP_STAGE] = {"stage", HOST | VERSION | PATH, PROMOTE, ACT_ROLE_ROOT,
                      "Stage the build at PATH as HOST's VERSION (digest recorded in its "
                      "manifest)."},
    [ACT_OP_PROMOTE] = {"promote", HOST | VERSION, 0, ACT_ROLE_OPERATOR,
                        "Make a staged VERSION the live one for the next wake."},
    [ACT_OP_RELEASES] = {"releases", HOST, 0, ACT_ROLE_VIEWER,
                         "List HOST's staged versions; * marks the live one."},
    [ACT_OP_CLAIM_SHOW] = {"claim.show", HOST, 0, ACT_ROLE_VIEWER,
                           "Print HOST's claim: holder, op, pin, held, revision."},
    [ACT_OP_CLAIM_ASSIGN] = {"claim.assign", HOST | BOX, 0, ACT_ROLE_OPERATOR,
                             "Name BOX as the box that runs HOST."},
    [ACT_OP_CLAIM_RELEASE] = {"claim.release", HOST, 0, ACT_ROLE_OPERATOR,
                              "Retire HOST here; no box wakes it until it is assigned again."},
    [ACT_OP_STATS] = {"stats", 0, 0, ACT_ROLE_VIEWER, "Show the daemon's counters."},
    [ACT_OP_VERSION] = {"version", 0, 0, ACT_ROLE_VIEWER,
                        "Show the versions of activatorctl and activatord."},
};

const act_op_spec *act_op_spec_of(act_op op)
{
    if ((unsigned)op >= ACT_OP__COUNT)
        return NULL;
    return &ops[op];
}

const char *act_op_name(act_op op)
{
    const act_op_spec *spec = act_op_spec_of(op);
    return spec ? spec->name : NULL;
}

int act_op_from_name(const char *name)
{
    for (size_t i = 0; i < ACT_OP__COUNT; i++)
        if (strcmp(ops[i].name, name) == 0)
            return (int)i;
    return -1;
}

const act_field_spec *act_fields(size_t *n)
{
    *n = ARRAY_SIZE(fields);
    return fields;
}

const act_field_spec *act_field_spec_of(act_field field)
{
    for (size_t i = 0; i < ARRAY_SIZE(fields); i++)
        if (fields[i].bit == field)
            return &fields[i];
    return NULL;
}

int act_field_choice(const act_field_spec *field, const char *value)
{
    for (size_t i = 0; field->choices && field->choices[i]; i++)
        if (strcmp(field->choices[i], value) == 0)
            return (int)i;
    return -1;
}

const char *act_role_name(act_role role)
{
    switch (role) {
    case ACT_ROLE_VIEWER:
        return "viewer";
    case ACT_ROLE_OPERATOR:
        return "operator";
    case ACT_ROLE_ROOT:
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

void act_fields_list(unsigned set, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < ARRAY_SIZE(fields); i++)
        if (set & fields[i].bit)
            append_item(out, size, &used, ", ", fields[i].name);
    if (used == 0)
        snprintf(out, size, "none");
}

void act_field_choices_list(const act_field_spec *field, const char *sep, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; field->choices && field->choices[i]; i++)
        append_item(out, size, &used, sep, field->choices[i]);
}

void act_ops_list(char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < ACT_OP__COUNT; i++)
        append_item(out, size, &used, ", ", ops[i].name);
}
