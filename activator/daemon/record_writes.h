/* The generation records' durable writes, off the loop, in the host's lane
 * of the daemon's workers. */
#pragma once

#include "activator/daemon/host.h"
#include "activator/records/records.h"

/* Writes record (a copy is taken). With build_state, the build state is
 * noted first (written if the build changed). written(host, result, err)
 * follows on the loop. */
typedef void (*act_record_written_fn)(act_daemon_host *host, int result, const act_error *err);
int act_record_write_async(act_daemon_host *host, const act_generation_record *record,
                           const act_build_state *build_state, act_record_written_fn written,
                           act_error *err);

/* Removes the record of a generation that is proven stopped; failures are
 * logged, and removed(userdata) follows on the loop either way. */
typedef void (*act_record_removed_fn)(void *userdata);
void act_record_remove_async(act_daemon_host *host, uint64_t generation,
                             act_record_removed_fn removed, void *userdata);
