/* The generation records' writes, off the loop.
 *
 * A record is written temp + rename (atomic, not synced: a generation does
 * not outlive a power loss), and the build state (when the build changed)
 * temp + fsync + rename + fsync dir: one to several milliseconds on a disk,
 * during which a loop that wrote it itself would serve no other host. So
 * the write runs on a worker of daemon->offload, in the host's lane (a host's
 * record writes and removals land in the order they were made), from a
 * copy of what to write; the step that waits for it continues on the loop. */
#include "activator/daemon/generations/record_writes.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/log.h"

typedef struct record_write {
    /* Every job in flight, in the daemon's list (record_writes_in_flight):
     * freeing the offload drops the done() of what it ran, and a handover or
     * a stop frees it with removals in flight. */
    struct record_write *prev, *next;
    ad_daemon *daemon;
    ad_host *host; /* for written(), on the loop only */
    ad_record_written_fn written;
    ad_record_removed_fn removed; /* for removed(), on the loop only */
    void *removed_userdata;
    int host_dirfd; /* the job's own: the host's may close while it runs */
    char host_name[ACT_NAME_MAX + 1];
    enum { WRITE_RECORD, REMOVE_RECORD } op;
    rec_generation_record record; /* or, to remove, its generation */
    bool note_build_state;
    rec_build_state build_state;
    int result;
    act_error err;
} record_write;

static void run_write(void *data)
{
    record_write *job = data;
    if (job->op == REMOVE_RECORD) {
        job->result = rec_remove_generation(job->host_dirfd, job->record.generation, &job->err);
        return;
    }
    job->result = job->note_build_state ? rec_note_build_state(job->host_dirfd, job->host_name,
                                                               &job->build_state, &job->err)
                                        : 0;
    if (job->result >= 0)
        job->result = rec_write_generation(job->host_dirfd, &job->record, &job->err);
}

static void unlink_job(record_write *job)
{
    if (job->prev)
        job->prev->next = job->next;
    else
        job->daemon->record_writes_in_flight = job->next;
    if (job->next)
        job->next->prev = job->prev;
}

static void complete_write(void *data)
{
    _cleanup_free_ record_write *job = data;
    unlink_job(job);
    act_closep(&job->host_dirfd);
    if (job->written) {
        job->written(job->host, job->result, &job->err);
    } else {
        if (job->result < 0)
            act_log(LOG_WARNING, "host %s: %s", job->host_name, job->err.message);
        if (job->removed)
            job->removed(job->removed_userdata);
    }
}

static int submit(ad_host *host, record_write *job, act_error *err)
{
    job->host = host;
    job->daemon = host->daemon;
    job->host_dirfd = -1;
    int r = ad_host_dir(host, err);
    /* A copy of the host's fd, which a parked host closes (10,000 parked
     * hosts hold none) whatever its workers still do with it. */
    if (r >= 0 && (job->host_dirfd = fcntl(r, F_DUPFD_CLOEXEC, 3)) < 0)
        r = act_error_set(err, errno, "host %s: cannot duplicate its directory's fd: %s",
                          host->name, strerror(errno));
    if (r >= 0) {
        snprintf(job->host_name, sizeof(job->host_name), "%s", host->name);
        r = act_offload_submit(job->daemon->offload, act_offload_lane(job->host_name), run_write,
                               complete_write, job, err);
    }
    if (r < 0) {
        act_closep(&job->host_dirfd);
        free(job);
        return r;
    }
    job->next = job->daemon->record_writes_in_flight;
    if (job->next)
        job->next->prev = job;
    job->daemon->record_writes_in_flight = job;
    return r;
}

void ad_record_writes_forget(ad_daemon *daemon)
{
    while (daemon->record_writes_in_flight) {
        record_write *job = daemon->record_writes_in_flight;
        unlink_job(job);
        act_closep(&job->host_dirfd);
        free(job);
    }
}

int ad_record_write_async(ad_host *host, const rec_generation_record *record,
                          const rec_build_state *build_state, ad_record_written_fn written,
                          act_error *err)
{
    assert(host && record && written);
    record_write *job = calloc(1, sizeof(*job));
    if (!job)
        return act_error_set(err, ENOMEM, "out of memory");
    job->op = WRITE_RECORD;
    job->written = written;
    job->record = *record;
    if (build_state) {
        job->note_build_state = true;
        job->build_state = *build_state;
    }
    return submit(host, job, err);
}

void ad_record_remove_async(ad_host *host, uint64_t generation, ad_record_removed_fn removed,
                            void *userdata)
{
    assert(host && removed);
    record_write *job = calloc(1, sizeof(*job));
    act_error err = {0};
    if (!job) {
        act_log(LOG_WARNING, "host %s: out of memory removing the record of generation %" PRIu64,
                host->name, generation);
        removed(userdata);
        return;
    }
    job->op = REMOVE_RECORD;
    job->record.generation = generation;
    job->removed = removed;
    job->removed_userdata = userdata;
    if (submit(host, job, &err) < 0) {
        act_log(LOG_WARNING, "host %s: %s", host->name, err.message);
        removed(userdata);
    }
}
