#include "activator/ctl/op_line.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/paths.h"
#include "common/error.h"
#include "common/names.h"

/* The getopt value of the option that sets field i of ctrl_fields(). */
#define OPT_FIELD 256
#define MAX_OPTIONS 16
#define MAX_POSITIONAL 4

/* Name and path fields are positional arguments, in table order; flags and
 * choices are options. */
static bool is_positional(const ctrl_field_spec *field)
{
    return field->kind == CTRL_FIELD_KIND_NAME || field->kind == CTRL_FIELD_KIND_PATH;
}

/* The option that sets a field: "no_wait" is --no-wait. */
static void option_name(const ctrl_field_spec *field, char *out, size_t size)
{
    snprintf(out, size, "%s", field->name);
    for (char *c = out; *c; c++)
        if (*c == '_')
            *c = '-';
}

/* How a positional field is shown in usage: "host" is HOST. */
static void argument_name(const ctrl_field_spec *field, char *out, size_t size)
{
    snprintf(out, size, "%s", field->name);
    for (char *c = out; *c; c++)
        *c = (char)toupper((unsigned char)*c);
}

/* The positional fields of spec: the required ones, then the optional ones.
 * Returns how many, with how many of them are required in *required. */
static size_t positional_fields(const ctrl_op_spec *spec, const ctrl_field_spec **out,
                                size_t *required)
{
    size_t n_fields, n = 0;
    const ctrl_field_spec *fields = ctrl_fields(&n_fields);
    unsigned sets[2] = {spec->required, spec->optional};
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < n_fields && n < MAX_POSITIONAL; i++)
            if ((sets[pass] & fields[i].bit) && is_positional(&fields[i]))
                out[n++] = &fields[i];
        if (pass == 0)
            *required = n;
    }
    return n;
}

static void append(char *out, size_t size, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void append(char *out, size_t size, size_t *used, const char *fmt, ...)
{
    if (*used >= size)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out + *used, size - *used, fmt, ap);
    va_end(ap);
    if (n > 0)
        *used += (size_t)n;
}

/* "HOST VERSION [--mode overlap|stop-first] [--no-wait]" for swap. */
void ctl_op_usage(const ctrl_op_spec *spec, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    const ctrl_field_spec *positional[MAX_POSITIONAL];
    size_t required, n = positional_fields(spec, positional, &required);
    for (size_t i = 0; i < n; i++) {
        char argument[32];
        argument_name(positional[i], argument, sizeof(argument));
        append(out, size, &used, i < required ? "%s%s" : "%s[%s]", used ? " " : "", argument);
    }
    size_t n_fields;
    const ctrl_field_spec *fields = ctrl_fields(&n_fields);
    for (size_t i = 0; i < n_fields; i++) {
        if (!(spec->optional & fields[i].bit) || is_positional(&fields[i]))
            continue;
        char option[32], choices[96] = "";
        option_name(&fields[i], option, sizeof(option));
        if (fields[i].kind == CTRL_FIELD_KIND_CHOICE)
            ctrl_field_choices_list(&fields[i], "|", choices, sizeof(choices));
        else if (fields[i].kind == CTRL_FIELD_KIND_COUNT ||
                 fields[i].kind == CTRL_FIELD_KIND_REVISION)
            snprintf(choices, sizeof(choices), "N");
        append(out, size, &used, "%s[--%s%s%s]", used ? " " : "", option, *choices ? " " : "",
               choices);
    }
}

/* The sub-command of command that sends spec ("show" for claim.show), or
 * NULL when spec is not one of its ops. */
const char *ctl_sub_command(const ctl_command *command, const ctrl_op_spec *spec)
{
    size_t len = command->ops_prefix ? strlen(command->ops_prefix) : 0;
    if (!len || strncmp(spec->name, command->ops_prefix, len) != 0)
        return NULL;
    return spec->name + len;
}

bool ctl_sub_command_usage(const ctl_command *command, const ctrl_op_spec *spec, char *out,
                           size_t size)
{
    const char *sub = ctl_sub_command(command, spec);
    if (!sub)
        return false;
    char arguments[128];
    ctl_op_usage(spec, arguments, sizeof(arguments));
    snprintf(out, size, "%s %s", sub, arguments);
    return true;
}

/* "show HOST | assign HOST BOX | release HOST" for claim. */
static void sub_commands_usage(const ctl_command *command, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (ctrl_op op = 0; op < CTRL_OP__COUNT; op++) {
        char line[160];
        if (ctl_sub_command_usage(command, ctrl_op_spec_of(op), line, sizeof(line)))
            append(out, size, &used, "%s%s", used ? " | " : "", line);
    }
}

void ctl_command_arguments(const ctl_command *command, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    if (command->ops_prefix) {
        sub_commands_usage(command, out, size);
        used = strlen(out);
        if (command->usage)
            append(out, size, &used, "%s%s", used ? " | " : "", command->usage);
        return;
    }
    if (command->op >= 0) {
        ctl_op_usage(ctrl_op_spec_of((ctrl_op)command->op), out, size);
        used = strlen(out);
    }
    if (command->usage)
        append(out, size, &used, "%s%s", used ? " " : "", command->usage);
}

int ctl_check_name(const ctl_command *command, const char *what, const char *name)
{
    act_error err = {0};
    if (act_name_check(what, name, &err) < 0)
        return ctl_usage_error(command, "%s", err.message);
    return 0;
}

/* An image layout's reference, oci:PATH[:TAG], with its path made
 * absolute. */
static int absolute_image_reference(const ctl_command *command, const char *given, char *out,
                                    size_t size)
{
    const char *rest = given + 4;
    size_t path_len = act_image_layout_path_len(rest);
    char path[PATH_MAX], absolute[PATH_MAX];
    if (path_len == 0 || path_len >= sizeof(path))
        return ctl_usage_error(command, "'%s' names no image layout; give oci:PATH[:TAG]", given);
    memcpy(path, rest, path_len);
    path[path_len] = '\0';
    if (path[0] == '/') {
        snprintf(absolute, sizeof(absolute), "%s", path);
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof(cwd)) ||
            snprintf(absolute, sizeof(absolute), "%s/%s", cwd, path) >= (int)sizeof(absolute))
            return ctl_usage_error(command, "cannot make '%s' an absolute path", path);
    }
    if (access(absolute, R_OK) != 0)
        return ctl_usage_error(command, "%s: %s; name an image layout this user can read", absolute,
                               strerror(errno));
    if (snprintf(out, size, "oci:%s%s", absolute, rest + path_len) >= (int)size)
        return ctl_usage_error(command, "'%s' is too long", given);
    return 0;
}

/* The daemon reads a path on its box from its own working directory: a
 * relative one is made absolute here, where the user meant it. */
static int absolute_path(const ctl_command *command, const char *given, char *out, size_t size)
{
    if (strncmp(given, "oci:", 4) == 0)
        return absolute_image_reference(command, given, out, size);
    /* A registry's image: the daemon reads it, not this box's files. */
    if (strncmp(given, "docker://", 9) == 0) {
        if (snprintf(out, size, "%s", given) >= (int)size)
            return ctl_usage_error(command, "'%s' is too long", given);
        return 0;
    }
    if (given[0] == '/') {
        snprintf(out, size, "%s", given);
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof(cwd)) || snprintf(out, size, "%s/%s", cwd, given) >= (int)size)
            return ctl_usage_error(command, "cannot make '%s' an absolute path", given);
    }
    if (access(out, R_OK) != 0)
        return ctl_usage_error(command, "%s: %s; name a file this user can read", out,
                               strerror(errno));
    return 0;
}

static int add_positional(const ctl_command *command, const ctrl_field_spec *field,
                          const char *value, json_object *request)
{
    if (field->kind == CTRL_FIELD_KIND_PATH) {
        char path[PATH_MAX];
        int r = absolute_path(command, value, path, sizeof(path));
        if (r == 0)
            json_object_object_add(request, field->name, json_object_new_string(path));
        return r;
    }
    int r = ctl_check_name(command, field->name, value);
    if (r == 0)
        json_object_object_add(request, field->name, json_object_new_string(value));
    return r;
}

static int add_positionals(const ctl_command *command, const ctrl_op_spec *spec, int argc,
                           char **argv, json_object *request)
{
    const ctrl_field_spec *positional[MAX_POSITIONAL];
    size_t required, n = positional_fields(spec, positional, &required);
    if ((size_t)argc < required) {
        char usage[256];
        ctl_command_arguments(command, usage, sizeof(usage));
        return ctl_usage_error(command, "missing argument(s); usage: activatorctl %s %s",
                               command->name, usage);
    }
    if ((size_t)argc > n)
        return ctl_usage_error(command, "unexpected argument '%s'", argv[n]);
    for (int i = 0; i < argc; i++) {
        int r = add_positional(command, positional[i], argv[i], request);
        if (r != 0)
            return r;
    }
    return 0;
}

/* An option's value into the request: 0, or 1 for a value the field does
 * not take. */
static int add_option(const ctrl_field_spec *field, const char *value, json_object *request)
{
    if (field->kind == CTRL_FIELD_KIND_FLAG) {
        json_object_object_add(request, field->name, json_object_new_boolean(1));
        return 0;
    }
    if (field->kind == CTRL_FIELD_KIND_COUNT || field->kind == CTRL_FIELD_KIND_REVISION) {
        char *end = NULL;
        errno = 0;
        unsigned long long n = strtoull(value, &end, 10);
        unsigned long long most =
            field->kind == CTRL_FIELD_KIND_COUNT ? CTRL_FIELD_COUNT_MAX : INT64_MAX - 1;
        if (!isdigit((unsigned char)value[0]) || *end || errno || n > most)
            return 1;
        json_object_object_add(request, field->name, json_object_new_int64((int64_t)n));
        return 0;
    }
    if (ctrl_field_choice(field, value) < 0)
        return 1;
    json_object_object_add(request, field->name, json_object_new_string(value));
    return 0;
}

/* getopt's options for an op: --help, one per optional flag or choice
 * field, then extra (may be NULL). names holds the option names. */
static void op_options(const ctrl_op_spec *spec, const struct option *extra,
                       struct option *longopts, char names[][32])
{
    size_t n_fields, n = 0;
    const ctrl_field_spec *fields = ctrl_fields(&n_fields);
    longopts[n++] = (struct option){"help", no_argument, 0, 'h'};
    for (size_t i = 0; i < n_fields && n < MAX_OPTIONS - 4; i++) {
        if (!(spec->optional & fields[i].bit) || is_positional(&fields[i]))
            continue;
        option_name(&fields[i], names[n], 32);
        int has_arg = fields[i].kind == CTRL_FIELD_KIND_FLAG ? no_argument : required_argument;
        longopts[n] = (struct option){names[n], has_arg, 0, OPT_FIELD + (int)i};
        n++;
    }
    for (const struct option *o = extra; o && o->name && n < MAX_OPTIONS - 1; o++)
        longopts[n++] = *o;
    longopts[n] = (struct option){0, 0, 0, 0};
}

int ctl_op_parse(const ctl_command *command, const ctrl_op_spec *spec, int argc, char **argv,
                 const ctl_extra_options *extra, json_object *request)
{
    struct option longopts[MAX_OPTIONS];
    char names[MAX_OPTIONS][32];
    op_options(spec, extra ? extra->options : NULL, longopts, names);
    size_t n_fields;
    const ctrl_field_spec *fields = ctrl_fields(&n_fields);
    optind = 0; /* re-initialises GNU getopt for this argument vector */
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (opt == 'h')
            return -1;
        if (opt == '?')
            return ctl_usage_error(command, "unknown option '%s'", argv[optind - 1]);
        int r = opt >= OPT_FIELD ? add_option(&fields[opt - OPT_FIELD], optarg, request)
                : extra          ? extra->on_option(opt)
                                 : 1;
        if (r != 0)
            return ctl_usage_error(command, "bad value '%s' for option '%s'", optarg ? optarg : "",
                                   argv[optind - (optarg ? 2 : 1)]);
    }
    return add_positionals(command, spec, argc - optind, argv + optind, request);
}
