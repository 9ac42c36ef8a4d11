/* prepare's file work, off the loop: resolve the build, hash its executable,
 * and, for a "#!" script, find its interpreter.
 *
 * Hashing an executable costs as long as the file is big, so it runs on a
 * worker of daemon->offload in the host's lane (after the host's record
 * writes asked for before it), and the wake continues on the loop when it is
 * done. The exec fd it hands back is the one it hashed: the hash-then-exec
 * guarantee holds whichever thread hashed it. */
#pragma once

#include <stdbool.h>

#include "activator/daemon/host/host.h"
#include "activator/daemon/wake/shebang.h"
#include "release/release.h"

typedef struct ad_prepared {
    int result;          /* 0, or a negative errno with err */
    bool script_problem; /* result is the script's interpreter's fault, not the build's */
    act_error err;
    rel_resolved resolved; /* exec_fd -1 unless result is 0; the callback takes it */
    /* The executable is a "#!" script: it runs from its fd kept open across
     * the exec (the kernel hands the interpreter /dev/fd/N), and interpreter
     * names what its first line asks for. */
    bool is_script;
    char interpreter[AD_SHEBANG_MAX];
} ad_prepared;

/* prepared is valid during the call; move resolved out to keep the fd. */
typedef void (*ad_prepared_fn)(ad_host *host, ad_prepared *prepared, void *userdata);

/* Resolves host's build (pin NULL: the live link, read once) on a worker,
 * then calls done on the loop. Returns 0, or a negative errno with err when
 * the work could not even be queued (done is then not called). */
int ad_build_prepare_async(ad_host *host, const rel_pin *pin, ad_prepared_fn done, void *userdata,
                           act_error *err);
/* The same, with dropped(userdata) called instead of done when the daemon
 * stops with the work in flight (ad_build_prepares_forget). */
int ad_build_prepare_async_droppable(ad_host *host, const rel_pin *pin, ad_prepared_fn done,
                                     void (*dropped)(void *userdata), void *userdata,
                                     act_error *err);

/* Frees the jobs whose done() the offload will not run any more: call once
 * act_offload_free(daemon->offload) returned. */
void ad_build_prepares_forget(ad_daemon *daemon);
