/* Blocking work off the event loop: fsync'd writes and file reads run on
 * worker threads, and their completion runs back on the loop.
 *
 * The daemon's loop must never block (a durable write costs one to several
 * milliseconds on a disk, and every host waits while the loop does). A job
 * is split in two: work(), on a worker thread, touches only the job's own
 * memory and the files it names; done(), on the loop, hands the result to
 * whoever owns the state. Jobs in the same lane run one at a time in the
 * order submitted (a host's writes stay ordered); different lanes run side
 * by side, so the filesystem can commit their fsyncs together. */
#pragma once

#include <systemd/sd-event.h>

#include "common/cleanup.h"
#include "common/error.h"

typedef struct act_offload act_offload;

typedef void (*act_offload_work_fn)(void *job);
typedef void (*act_offload_done_fn)(void *job);

/* n_threads workers (lanes map onto them), completions on loop. */
int act_offload_new(sd_event *loop, unsigned n_threads, act_offload **out, act_error *err);

/* How much nicer than the loop background workers run: what they do may
 * take seconds and nobody waits on it by the millisecond (hashing whole
 * builds), while the loop and the other workers are on a wake's path. At
 * 10 a busy worker gets about a tenth of a CPU the others want, and all of
 * an idle one. */
#define ACT_OFFLOAD_BACKGROUND_NICE 10

/* The same, with workers ACT_OFFLOAD_BACKGROUND_NICE nicer than the caller
 * (at most 19). */
int act_offload_new_background(sd_event *loop, unsigned n_threads, act_offload **out,
                               act_error *err);

/* Queues work(job) in lane; done(job) follows on the loop, unless the
 * offload is freed first. The job's memory is the caller's until done. */
int act_offload_submit(act_offload *offload, unsigned lane, act_offload_work_fn work,
                       act_offload_done_fn done, void *job, act_error *err);

/* The same, with drop(job) called instead of done(job) for a job that ran
 * but whose done() the offload will not call any more (it was freed first):
 * drop frees what the job holds without touching the owner's state, which
 * is being torn down. */
int act_offload_submit_droppable(act_offload *offload, unsigned lane, act_offload_work_fn work,
                                 act_offload_done_fn done, act_offload_done_fn drop, void *job,
                                 act_error *err);

/* Runs every job already submitted to its end (a write asked for happens),
 * calls no further done() (but a droppable job's drop()), so the jobs'
 * owner may free them once this returns, and frees the offload. May be called from within a done(). */
void act_offload_free(act_offload *offload);
DEFINE_TRIVIAL_CLEANUP_FUNC(act_offload *, act_offload_free)

/* A lane for a name: the same name, the same lane. */
unsigned act_offload_lane(const char *name);
