/* prepare's file work off the loop (wake/build_prepare.h). */
#include "activator/daemon/wake/build_prepare.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "activator/daemon/wake/shebang.h"
#include "common/cleanup.h"

typedef struct prepare_job {
    /* Every job in flight, in the daemon's list (prepares_in_flight): a
     * daemon that stops frees the jobs whose done() will not run. */
    struct prepare_job *prev, *next;
    ad_daemon *daemon;
    ad_host *host; /* for done(), on the loop only */
    ad_prepared_fn done;
    void (*dropped)(void *userdata);
    void *userdata;
    rel_store *releases;
    char host_name[ACT_NAME_MAX + 1];
    char state_directory[4096];
    bool pinned;
    rel_pin pin;
    ad_prepared prepared;
} prepare_job;

/* The interpreter as the kernel will find it. One inside this very build
 * (under <releases>/<host>/<version>/) is verified as the executable is:
 * opened beneath the build, hashed and compared with the manifest. Anything
 * else belongs to the box, as the dynamic loader and libc do. */
static int check_interpreter(prepare_job *job)
{
    ad_prepared *p = &job->prepared;
    const rel_identity *id = &p->resolved.identity;
    char build_dir[4096 + 2 * REL_NAME_SIZE + 16];
    /* StateDirectory=/var/lib/activator/ names the same place as without
     * its slash. */
    int state_len = (int)strlen(job->state_directory);
    while (state_len > 1 && job->state_directory[state_len - 1] == '/')
        state_len--;
    snprintf(build_dir, sizeof(build_dir), "%.*s/releases/%s/%s/", state_len, job->state_directory,
             job->host_name, id->version);
    size_t prefix = strlen(build_dir);
    if (strncmp(p->interpreter, build_dir, prefix) == 0) {
        rel_pin exact = {0};
        snprintf(exact.version, sizeof(exact.version), "%s", id->version);
        snprintf(exact.digest, sizeof(exact.digest), "%s", id->build_digest);
        rel_resolved interpreter = {.exec_fd = -1};
        act_error why = {0};
        int r = rel_resolve(job->releases, job->host_name, &exact, p->interpreter + prefix,
                            &interpreter, &why);
        rel_resolved_release(&interpreter);
        /* Bytes that do not hash to the manifest are the build's fault;
         * a path that names no file of it is the script's. */
        p->script_problem =
            r != -EBADMSG && r != -EUCLEAN && r != -ELOOP && r != -EPERM && r != -EKEYREJECTED;
        if (r < 0)
            return act_error_set(&p->err, -r,
                                 "host %s: version %s: %s is a script for the interpreter %s "
                                 "inside the build, which does not verify: %s",
                                 job->host_name, id->version, id->exec_path, p->interpreter,
                                 why.message);
        return 0;
    }
    struct stat st;
    if (stat(p->interpreter, &st) < 0 || !S_ISREG(st.st_mode) || !(st.st_mode & 0111)) {
        int errnum = errno;
        p->script_problem = true;
        return act_error_set(&p->err, errnum ? errnum : EACCES,
                             "host %s: version %s: %s is a script for the interpreter %s, "
                             "which this box does not have as an executable file (%s); install "
                             "it, or stage a build whose \"#!\" line names one it has",
                             job->host_name, id->version, id->exec_path, p->interpreter,
                             errnum ? strerror(errnum) : "not an executable regular file");
    }
    return 0;
}

static int inspect_executable(prepare_job *job)
{
    ad_prepared *p = &job->prepared;
    char head[AD_SHEBANG_MAX];
    ssize_t n = pread(p->resolved.exec_fd, head, sizeof(head) - 1, 0);
    if (n < 0)
        return act_error_set(&p->err, errno, "host %s: version %s: cannot read %s: %s",
                             job->host_name, p->resolved.identity.version,
                             p->resolved.identity.exec_path, strerror(errno));
    head[n] = '\0';
    act_error why = {0};
    int r = ad_shebang_parse(head, (size_t)n, p->interpreter, &why);
    if (r < 0) {
        p->script_problem = true;
        return act_error_set(&p->err, -r, "host %s: version %s: %s is a script, but %s",
                             job->host_name, p->resolved.identity.version,
                             p->resolved.identity.exec_path, why.message);
    }
    p->is_script = r == 1;
    return p->is_script ? check_interpreter(job) : 0;
}

static void run_prepare(void *data)
{
    prepare_job *job = data;
    ad_prepared *p = &job->prepared;
    /* The live link is read once here; everything after uses this fd. The
     * build's manifest names its executable (Exec='s path, for a directory
     * build, when it was staged), so no override is passed. */
    p->result = rel_resolve(job->releases, job->host_name, job->pinned ? &job->pin : NULL, NULL,
                            &p->resolved, &p->err);
    if (p->result == 0)
        p->result = inspect_executable(job);
    if (p->result < 0)
        rel_resolved_release(&p->resolved);
}

static void unlink_job(prepare_job *job)
{
    if (job->prev)
        job->prev->next = job->next;
    else
        job->daemon->prepares_in_flight = job->next;
    if (job->next)
        job->next->prev = job->prev;
}

static void complete_prepare(void *data)
{
    _cleanup_free_ prepare_job *job = data;
    unlink_job(job);
    job->done(job->host, &job->prepared, job->userdata);
    rel_resolved_release(&job->prepared.resolved);
}

void ad_build_prepares_forget(ad_daemon *daemon)
{
    while (daemon->prepares_in_flight) {
        prepare_job *job = daemon->prepares_in_flight;
        unlink_job(job);
        if (job->dropped)
            job->dropped(job->userdata);
        rel_resolved_release(&job->prepared.resolved);
        free(job);
    }
}

int ad_build_prepare_async(ad_host *host, const rel_pin *pin, ad_prepared_fn done, void *userdata,
                           act_error *err)
{
    return ad_build_prepare_async_droppable(host, pin, done, NULL, userdata, err);
}

int ad_build_prepare_async_droppable(ad_host *host, const rel_pin *pin, ad_prepared_fn done,
                                     void (*dropped)(void *userdata), void *userdata,
                                     act_error *err)
{
    assert(host && done);
    _cleanup_free_ prepare_job *job = calloc(1, sizeof(*job));
    if (!job)
        return act_error_set(err, ENOMEM, "host %s: out of memory", host->name);
    ad_daemon *daemon = host->daemon;
    job->host = host;
    job->daemon = daemon;
    job->done = done;
    job->dropped = dropped;
    job->userdata = userdata;
    job->releases = daemon->releases;
    job->prepared.resolved.exec_fd = -1;
    snprintf(job->host_name, sizeof(job->host_name), "%s", host->name);
    snprintf(job->state_directory, sizeof(job->state_directory), "%s",
             daemon->config.state_directory);
    if (pin) {
        job->pinned = true;
        job->pin = *pin;
    }
    int r = act_offload_submit(daemon->offload, act_offload_lane(job->host_name), run_prepare,
                               complete_prepare, job, err);
    if (r < 0)
        return r;
    job->next = daemon->prepares_in_flight;
    if (job->next)
        job->next->prev = job;
    daemon->prepares_in_flight = TAKE_PTR(job); /* complete_prepare's now */
    return 0;
}
