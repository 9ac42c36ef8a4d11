/* claim export and claim import (claim_transfer.h). Both run on the store
 * itself (--store): an export is one list, at one revision; an import
 * checks every line first and writes nothing when one is wrong, then writes
 * each claim by compare-and-swap on the claim there now, so it is safe with
 * daemons running on the store (a claim one of them changes meanwhile is
 * reported, not overwritten). */
#include "activator/ctl/claim_transfer.h"
#include "activator/ctl/store_mode.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "claims/claims.h"
#include "common/cleanup.h"
#include "common/cleanup_json.h"
#include "common/names.h"

/* A line of an export: {"host":"web1","revision":1042,"claim":{...}}. */
typedef struct transfer_line {
    claim c;
    unsigned line;
} transfer_line;

bool ctl_claim_transfer_is(const char *sub)
{
    return sub && (strcmp(sub, "export") == 0 || strcmp(sub, "import") == 0);
}

typedef struct export_problems {
    unsigned n;
} export_problems;

static void export_problem(const char *host, const act_error *problem, void *userdata)
{
    ((export_problems *)userdata)->n++;
    fprintf(stderr, "activatorctl: claim export: host %s left out: %s\n", host, problem->message);
}

static int run_export(claim_store *store)
{
    act_error err = {0};
    claim *claims = NULL;
    size_t n = 0;
    uint64_t revision = 0;
    export_problems problems = {0};
    if (claims_list_at(store, &claims, &n, &revision, export_problem, &problems, &err) < 0) {
        fprintf(stderr, "activatorctl: claim export: %s\n", err.message);
        return CTL_EXIT_UNREACHABLE;
    }
    for (size_t i = 0; i < n; i++) {
        _cleanup_free_ char *body = claim_to_json(&claims[i]);
        if (!body) {
            free(claims);
            fprintf(stderr, "activatorctl: claim export: out of memory\n");
            return CTL_EXIT_FAILED;
        }
        printf("{\"host\":\"%s\",\"revision\":%" PRIu64 ",\"claim\":%s}\n", claims[i].host,
               claims[i].revision, body);
    }
    free(claims);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "activatorctl: claim export: cannot write: %m\n");
        return CTL_EXIT_FAILED;
    }
    return problems.n ? CTL_EXIT_FAILED : CTL_EXIT_OK;
}

/* Parses one line of an export (NUL-terminated) into *out; 0, or -EINVAL with *err saying
 * what is wrong (the caller names the file and line). */
static int parse_line(const char *text, claim *out, act_error *err)
{
    enum json_tokener_error jerr = json_tokener_success;
    _cleanup_(json_object_putp) json_object *root = json_tokener_parse_verbose(text, &jerr);
    if (!root || !json_object_is_type(root, json_type_object))
        return act_error_set(err, EINVAL, "not a JSON object (%s)",
                             root ? "wrong type" : json_tokener_error_desc(jerr));
    json_object *host = NULL, *body = NULL, *revision = NULL;
    int fields = json_object_object_length(root);
    if (!json_object_object_get_ex(root, "host", &host) ||
        !json_object_is_type(host, json_type_string))
        return act_error_set(err, EINVAL, "no string field host");
    if (!json_object_object_get_ex(root, "claim", &body) ||
        !json_object_is_type(body, json_type_object))
        return act_error_set(err, EINVAL, "no object field claim");
    bool has_revision = json_object_object_get_ex(root, "revision", &revision);
    if (fields != 2 + (has_revision ? 1 : 0))
        return act_error_set(err, EINVAL, "fields other than host, revision and claim");
    const char *name = json_object_get_string(host);
    if (act_name_check("host", name, err) < 0)
        return -EINVAL;
    const char *body_text = json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN);
    return claim_from_json(name, body_text, strlen(body_text), out, err);
}

/* Reads every line of path into *out; CTL_EXIT_OK, or an exit status after
 * printing where the first wrong line is. */
static int read_lines(const char *path, transfer_line **out, size_t *n_out)
{
    _cleanup_fclose_ FILE *in = strcmp(path, "-") == 0 ? NULL : fopen(path, "re");
    FILE *from = strcmp(path, "-") == 0 ? stdin : in;
    if (!from) {
        fprintf(stderr, "activatorctl: claim import: cannot open %s: %m\n", path);
        return CTL_EXIT_FAILED;
    }
    transfer_line *lines = NULL;
    size_t n = 0, cap = 0;
    _cleanup_free_ char *text = NULL;
    size_t size = 0;
    ssize_t len;
    for (unsigned number = 1; (len = getline(&text, &size, from)) >= 0; number++) {
        while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
            text[--len] = '\0';
        if (len == 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            transfer_line *grown = realloc(lines, cap * sizeof(*lines));
            if (!grown) {
                free(lines);
                fprintf(stderr, "activatorctl: claim import: out of memory\n");
                return CTL_EXIT_FAILED;
            }
            lines = grown;
        }
        act_error err = {0};
        if (parse_line(text, &lines[n].c, &err) < 0) {
            free(lines);
            fprintf(stderr,
                    "activatorctl: claim import: %s:%u: %s; nothing was written: fix the line "
                    "and import again\n",
                    path, number, err.message);
            return CTL_EXIT_FAILED;
        }
        for (size_t i = 0; i < n; i++)
            if (strcmp(lines[i].c.host, lines[n].c.host) == 0) {
                fprintf(stderr,
                        "activatorctl: claim import: %s:%u: host %s is on line %u too; nothing "
                        "was written: keep one of them\n",
                        path, number, lines[n].c.host, lines[i].line);
                free(lines);
                return CTL_EXIT_FAILED;
            }
        lines[n++].line = number;
    }
    if (ferror(from)) {
        free(lines);
        fprintf(stderr, "activatorctl: claim import: cannot read %s: %m\n", path);
        return CTL_EXIT_FAILED;
    }
    *out = lines;
    *n_out = n;
    return CTL_EXIT_OK;
}

/* Writes one claim over the one there now (or none), by compare-and-swap;
 * prints what happened. Returns whether it is in the store now. */
static bool import_one(claim_store *store, const transfer_line *line)
{
    act_error err = {0};
    claim current;
    const char *host = line->c.host;
    int found = claims_read(store, host, &current, &err);
    if (found < 0 && err.errnum != EINVAL && err.errnum != EIO) {
        fprintf(stderr, "activatorctl: claim import: host %s: %s\n", host, err.message);
        return false;
    }
    /* A claim there that cannot be read (damaged, malformed) is replaced
     * from revision 0 only where the store allows it; it says so if not. */
    uint64_t expected = found > 0 ? current.revision : 0;
    if (found > 0) {
        _cleanup_free_ char *now = claim_to_json(&current), *want = claim_to_json(&line->c);
        if (now && want && strcmp(now, want) == 0) {
            printf("%s unchanged (revision %" PRIu64 ")\n", host, current.revision);
            return true;
        }
    }
    uint64_t written = 0;
    int r = claims_cas(store, host, expected, &line->c, &written, NULL, &err);
    if (r == CLAIMS_CHANGED) {
        fprintf(stderr,
                "activatorctl: claim import: host %s: its claim changed while it was imported "
                "(a daemon wrote it); not written: import again to write over it\n",
                host);
        return false;
    }
    if (r < 0) {
        fprintf(stderr, "activatorctl: claim import: host %s: %s\n", host, err.message);
        return false;
    }
    printf("%s written (revision %" PRIu64 ")\n", host, written);
    return true;
}

static int run_import(claim_store *store, const char *path)
{
    transfer_line *lines = NULL;
    size_t n = 0;
    int status = read_lines(path, &lines, &n);
    if (status != CTL_EXIT_OK)
        return status;
    act_error err = {0};
    if (claims_store_check_layout(store, &err) < 0) {
        free(lines);
        fprintf(stderr, "activatorctl: claim import: %s\n", err.message);
        return err.errnum == EPROTONOSUPPORT ? CTL_EXIT_USAGE : CTL_EXIT_UNREACHABLE;
    }
    unsigned failed = 0;
    for (size_t i = 0; i < n; i++)
        if (!import_one(store, &lines[i]))
            failed++;
    free(lines);
    if (failed)
        fprintf(stderr, "activatorctl: claim import: %u of %zu claims not written\n", failed, n);
    return failed ? CTL_EXIT_FAILED : CTL_EXIT_OK;
}

int ctl_claim_transfer(const ctl_command *self, const ctl_options *options, int argc, char **argv)
{
    bool exporting = strcmp(argv[0], "export") == 0;
    if (exporting ? argc != 1 : argc != 2)
        return ctl_usage_error(self, exporting ? "export takes no argument"
                                               : "import takes one argument, FILE (- for "
                                                 "standard input)");
    if (!options->store_url)
        return ctl_usage_error(self, "export and import read and write the claim store itself: "
                                     "give --store URL (Store= of activatord.conf)");
    _cleanup_(claims_store_freep) claim_store *store = NULL;
    int status = ctl_store_open(options, &store);
    if (status != CTL_EXIT_OK)
        return status;
    return exporting ? run_export(store) : run_import(store, argv[1]);
}
