/* ExecCheckpoint= (moves/checkpoint_exec.h). Run as ExecRestore= is, by
 * generations/helper_leaf.c: a leaf of its own, proven empty before the result counts,
 * so no process of the program outlives what it reported. */
#include "activator/daemon/moves/checkpoint_exec.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "activator/daemon/generations/helper_leaf.h"
#include "common/cleanup.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/text.h"

/* "ID SHA256\n" is at most 64 + 1 + 64 + 1 bytes; anything longer is not
 * an answer. */
#define OUTPUT_MAX 256

struct ad_checkpoint_exec {
    ad_host *host;
    ad_checkpoint_done_fn done; /* NULL once abandoned */
    void *userdata;
    ad_helper *helper; /* the program in its leaf; freed with it, after on_leaf_retired */
    sd_event_source *output_source;
    int output_fd;
    char output[OUTPUT_MAX + 1];
    size_t output_len;
    bool output_overflow;
    uint64_t generation;
    int result;
    act_error err;
    claim_state written;
};

static void exec_free(ad_checkpoint_exec *exec)
{
    sd_event_source_disable_unref(exec->output_source);
    if (exec->output_fd >= 0)
        close(exec->output_fd);
    free(exec);
}

int ad_checkpoint_exec_parse(const char *output, size_t len, char *id, size_t id_size, char *sha256,
                             size_t sha256_size, act_error *err)
{
    char shown[ACT_TEXT_SHOW_MAX];
    act_text_show_bytes(output, len, shown, sizeof(shown));
    if (len > 0 && output[len - 1] == '\n')
        len--;
    const char *space = memchr(output, ' ', len);
    size_t id_len = space ? (size_t)(space - output) : 0;
    size_t sha_len = space ? len - id_len - 1 : 0;
    char id_text[ACT_NAME_MAX + 2] = "", sha_text[66] = "";
    if (space && id_len < sizeof(id_text) && sha_len < sizeof(sha_text)) {
        memcpy(id_text, output, id_len);
        memcpy(sha_text, space + 1, sha_len);
    }
    bool good_sha =
        strlen(sha_text) == 64 && sha_len == 64 && strspn(sha_text, "0123456789abcdef") == 64;
    if (!space || id_len != strlen(id_text) || !act_name_is_valid(id_text) || !good_sha)
        return act_error_set(err, EPROTO,
                             "ExecCheckpoint= printed \"%s\", not \"ID SHA256\" (one line: the "
                             "checkpoint's id, 1 to 64 of [A-Za-z0-9._-], a space, and the "
                             "archive's SHA-256 as 64 lowercase hex digits)",
                             shown);
    snprintf(id, id_size, "%s", id_text);
    snprintf(sha256, sha256_size, "%s", sha_text);
    return 0;
}

static void read_output(ad_checkpoint_exec *exec)
{
    for (;;) {
        char buf[512];
        ssize_t n = read(exec->output_fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        size_t room = OUTPUT_MAX - exec->output_len;
        if ((size_t)n > room)
            exec->output_overflow = true;
        size_t take = (size_t)n < room ? (size_t)n : room;
        memcpy(exec->output + exec->output_len, buf, take);
        exec->output_len += take;
    }
}

static int on_output(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    ad_checkpoint_exec *exec = userdata;
    read_output(exec);
    if (revents & EPOLLHUP)
        exec->output_source = sd_event_source_disable_unref(exec->output_source);
    return 0;
}

/* The leaf is proven empty (or not): only now is the result given. */
static void on_leaf_retired(bool proven, const char *why, void *userdata)
{
    ad_checkpoint_exec *exec = userdata;
    if (exec->done) {
        if (!proven) {
            exec->result = -EIO;
            act_error_set(&exec->err, EIO,
                          "host %s: the checkpoint program's cgroup is not proven empty: %s",
                          exec->host->name, why);
        }
        exec->done(exec->host, exec->result, exec->result == 0 ? &exec->written : NULL,
                   exec->result == 0 ? NULL : &exec->err, exec->userdata);
    } else if (!proven) {
        act_log(LOG_ERR, "host %s: abandoned ExecCheckpoint= not proven stopped: %s",
                exec->host->name, why);
    }
    exec_free(exec);
}

static void on_exit_(int status, void *userdata)
{
    ad_checkpoint_exec *exec = userdata;
    const char *program = ad_host_config(exec->host)->exec_checkpoint[0];
    read_output(exec);
    if (status != 0) {
        exec->result =
            act_error_set(&exec->err, EIO, "host %s: ExecCheckpoint= %s exited with status %d",
                          exec->host->name, program, status);
    } else if (exec->output_overflow) {
        exec->result = act_error_set(&exec->err, EPROTO,
                                     "host %s: ExecCheckpoint= %s printed more than %d bytes; "
                                     "it prints one line, \"ID SHA256\"",
                                     exec->host->name, program, OUTPUT_MAX);
    } else {
        claim_state *w = &exec->written;
        exec->result = ad_checkpoint_exec_parse(exec->output, exec->output_len, w->checkpoint,
                                                sizeof(w->checkpoint), w->sha256, sizeof(w->sha256),
                                                &exec->err);
        if (exec->result < 0) {
            act_error_prefix(&exec->err, "host %s", exec->host->name);
        } else {
            w->generation = exec->generation;
            w->stamp_usec = act_wallclock_usec();
            snprintf(w->box, sizeof(w->box), "%s", exec->host->daemon->config.box);
        }
    }
}

static void on_timeout(void *userdata)
{
    ad_checkpoint_exec *exec = userdata;
    exec->result = act_error_set(&exec->err, ETIMEDOUT,
                                 "host %s: ExecCheckpoint= did not finish within "
                                 "CheckpointTimeoutSec=%" PRIu64 "s",
                                 exec->host->name,
                                 ad_host_config(exec->host)->checkpoint_timeout_usec / 1000000u);
}

int ad_checkpoint_exec_start(ad_host *host, uint64_t generation, ad_checkpoint_done_fn done,
                             void *userdata, ad_checkpoint_exec **out, act_error *err)
{
    assert(host && done && out);
    const cfg_host *config = ad_host_config(host);
    ad_daemon *daemon = host->daemon;
    ad_checkpoint_exec *exec = calloc(1, sizeof(*exec));
    if (!exec)
        return act_error_set(err, ENOMEM, "out of memory");
    *exec = (ad_checkpoint_exec){.host = host,
                                 .done = done,
                                 .userdata = userdata,
                                 .output_fd = -1,
                                 .generation = generation};
    /* A socket, not a pipe: the helper runs as the host, whose other
     * processes could open a pipe through /proc/<helper>/fd/1 and write the
     * answer themselves; a socket cannot be opened that way (ENXIO). */
    int answer_fds[2] = {-1, -1};
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, answer_fds) < 0) {
        int r =
            act_error_set(err, errno, "cannot make a socket for its output: %s", strerror(errno));
        exec_free(exec);
        return r;
    }
    (void)shutdown(answer_fds[1], SHUT_RD);
    exec->output_fd = answer_fds[0];
    (void)fcntl(exec->output_fd, F_SETFL, O_NONBLOCK);
    char env[64];
    snprintf(env, sizeof(env), "ACTIVATOR_GENERATION=%" PRIu64, generation);
    ad_helper_spec spec = {
        .kind = "checkpoint",
        .number = generation,
        .argv = config->exec_checkpoint,
        .extra_env = env,
        .stdout_fd = answer_fds[1],
        .timeout_usec = config->checkpoint_timeout_usec,
        .exited = on_exit_,
        .timed_out = on_timeout,
        .retired = on_leaf_retired,
        .userdata = exec,
    };
    int r = ad_helper_start(host, &spec, &exec->helper, err);
    close(answer_fds[1]);
    if (r < 0 && !exec->helper) {
        exec_free(exec);
        return r;
    }
    if (r < 0) {
        act_error_prefix(err, "cannot start ExecCheckpoint=");
        exec->done = NULL;
        ad_helper_end(exec->helper); /* the leaf goes, proven empty, in the background */
        return r;
    }
    r = sd_event_add_io(daemon->loop, &exec->output_source, exec->output_fd, EPOLLIN, on_output,
                        exec);
    if (r < 0) {
        act_error_set(err, -r, "cannot watch ExecCheckpoint=: %s", strerror(-r));
        exec->done = NULL;
        ad_helper_end(exec->helper);
        return r;
    }
    *out = exec;
    return 0;
}

void ad_checkpoint_exec_abandon(ad_checkpoint_exec *exec)
{
    if (!exec)
        return;
    exec->done = NULL;
    ad_helper_end(exec->helper); /* nothing more when it is ending already */
}
