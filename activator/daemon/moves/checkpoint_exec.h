/* ExecCheckpoint=: the host's own checkpoint program, for transports other
 * than the built-in one. It runs in its own leaf (checkpoint-<N>) with the
 * host's credentials, bounded by CheckpointTimeoutSec=, and prints one line
 * on stdout, "ID SHA256", which is parsed strictly. */
#pragma once

#include "activator/daemon/moves/checkpoints.h"

typedef struct ad_checkpoint_exec ad_checkpoint_exec;

/* Starts it; done follows on the loop once its leaf is proven empty (never
 * from inside this call), with written filled on success (size 0: not
 * known). *out is the handle for ad_checkpoint_exec_abandon. */
int ad_checkpoint_exec_start(ad_host *host, uint64_t generation, ad_checkpoint_done_fn done,
                             void *userdata, ad_checkpoint_exec **out, act_error *err);

/* Kills it in the background; done is not called. */
void ad_checkpoint_exec_abandon(ad_checkpoint_exec *exec);

/* Parses the program's output: "ID SHA256" and an optional newline,
 * nothing else; id a name (common/names.h), SHA256 64 lowercase hex
 * digits. */
int ad_checkpoint_exec_parse(const char *output, size_t len, char *id, size_t id_size, char *sha256,
                             size_t sha256_size, act_error *err);
