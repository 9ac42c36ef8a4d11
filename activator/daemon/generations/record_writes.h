/* The generation records' writes, off the loop, in the host's lane of the
 * daemon's workers: each record atomic (temp + rename, not synced: a
 * generation does not outlive a power loss), the build state durable. */
#pragma once

#include "activator/daemon/host/host.h"
#include "activator/records/records.h"

/* Writes record (a copy is taken). With build_state, the build state is
 * noted first (written if the build changed). written(host, result, err)
 * follows on the loop. */
typedef void (*ad_record_written_fn)(ad_host *host, int result, const act_error *err);
int ad_record_write_async(ad_host *host, const rec_generation_record *record,
                          const rec_build_state *build_state, ad_record_written_fn written,
                          act_error *err);

/* Removes the record of a generation that is proven stopped; failures are
 * logged, and removed(userdata) follows on the loop either way. */
typedef void (*ad_record_removed_fn)(void *userdata);
void ad_record_remove_async(ad_host *host, uint64_t generation, ad_record_removed_fn removed,
                            void *userdata);

/* Frees the jobs whose done() the offload will not run any more: call once
 * act_offload_free(daemon->offload) returned (their writes ran to their
 * end there). */
void ad_record_writes_forget(ad_daemon *daemon);
