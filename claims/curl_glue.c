/* See curl_glue.h. */
#include "claims/curl_glue.h"
#include "common/clock.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

struct curl_glue {
    sd_event *event;
    CURLM *multi;
    sd_event_source *timer;
    sd_event_source *now; /* curl's "act now" timeout, without a timerfd */
    /* Every io source handed to curl, so freeing the glue releases any that
     * curl did not ask us to remove before its cleanup. */
    sd_event_source **ios;
    size_t n_ios;
};

static void forget_io(curl_glue *glue, sd_event_source *io)
{
    for (size_t i = 0; i < glue->n_ios; i++) {
        if (glue->ios[i] == io) {
            glue->ios[i] = glue->ios[--glue->n_ios];
            return;
        }
    }
}

sd_event *curl_glue_event(curl_glue *glue)
{
    assert(glue);
    return glue->event;
}

/* Collects finished transfers after curl made progress. Each is removed from
 * the multi handle before its callback runs, so the callback is free to do
 * anything with it. */
static void check_finished(curl_glue *glue)
{
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(glue->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        CURL *easy = msg->easy_handle;
        CURLcode result = msg->data.result;
        curl_glue_job *job = NULL;
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&job);
        curl_multi_remove_handle(glue->multi, easy);
        if (job && job->done)
            job->done(job, result);
    }
}

static int on_io(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    curl_glue *glue = userdata;
    int action = 0, running;
    if (revents & EPOLLIN)
        action |= CURL_CSELECT_IN;
    if (revents & EPOLLOUT)
        action |= CURL_CSELECT_OUT;
    if (revents & (EPOLLERR | EPOLLHUP))
        action |= CURL_CSELECT_ERR;
    curl_multi_socket_action(glue->multi, fd, action, &running);
    check_finished(glue);
    return 0;
}

static int on_timer(sd_event_source *source, uint64_t usec, void *userdata)
{
    curl_glue *glue = userdata;
    int running;
    curl_multi_socket_action(glue->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    check_finished(glue);
    return 0;
}

/* curl says which events it wants on a socket; the io source lives in curl's
 * per-socket pointer so it can be found again when the wish changes. */
static int socket_function(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
    curl_glue *glue = userp;
    sd_event_source *io = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (io) {
            forget_io(glue, io);
            sd_event_source_disable_unref(io);
            curl_multi_assign(glue->multi, fd, NULL);
        }
        return 0;
    }
    uint32_t events = 0;
    if (what == CURL_POLL_IN || what == CURL_POLL_INOUT)
        events |= EPOLLIN;
    if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT)
        events |= EPOLLOUT;
    if (io) {
        if (sd_event_source_set_io_events(io, events) < 0 ||
            sd_event_source_set_enabled(io, SD_EVENT_ON) < 0)
            return -1;
        return 0;
    }
    sd_event_source **grown = realloc(glue->ios, (glue->n_ios + 1) * sizeof(*grown));
    if (!grown)
        return -1;
    glue->ios = grown;
    if (sd_event_add_io(glue->event, &io, fd, events, on_io, glue) < 0)
        return -1;
    glue->ios[glue->n_ios++] = io;
    curl_multi_assign(glue->multi, fd, io);
    return 0;
}

static int on_now(sd_event_source *source, void *userdata)
{
    return on_timer(source, 0, userdata);
}

/* Each call replaces the timeout before it. A timeout of 0, which starts
 * every request and finishes it, runs on the loop's next pass as a deferred
 * source: the timer's timerfd would cost a settime, an epoll wait for its
 * expiry and a read, before each request's first byte left. */
static int timer_function(CURLM *multi, long timeout_ms, void *userp)
{
    curl_glue *glue = userp;
    bool at_once = timeout_ms == 0;
    if (sd_event_source_set_enabled(glue->now, at_once ? SD_EVENT_ONESHOT : SD_EVENT_OFF) < 0)
        return -1;
    if (timeout_ms <= 0)
        return sd_event_source_set_enabled(glue->timer, SD_EVENT_OFF) < 0 ? -1 : 0;
    uint64_t now = act_loop_now_usec(glue->event);
    if (sd_event_source_set_time(glue->timer, now + (uint64_t)timeout_ms * 1000) < 0 ||
        sd_event_source_set_enabled(glue->timer, SD_EVENT_ONESHOT) < 0)
        return -1;
    return 0;
}

int curl_glue_new(sd_event *event, curl_glue **out)
{
    assert(event);
    assert(out);
    curl_glue *glue = calloc(1, sizeof(*glue));
    if (!glue)
        return -ENOMEM;
    glue->event = sd_event_ref(event);
    glue->multi = curl_multi_init();
    int r = glue->multi ? 0 : -ENOMEM;
    if (r == 0)
        r = sd_event_add_time(event, &glue->timer, CLOCK_MONOTONIC, UINT64_MAX, 0, on_timer, glue);
    if (r == 0)
        r = sd_event_add_defer(event, &glue->now, on_now, glue);
    if (r == 0)
        r = sd_event_source_set_enabled(glue->now, SD_EVENT_OFF);
    if (r < 0) {
        curl_glue_free(glue);
        return r;
    }
    sd_event_source_set_enabled(glue->timer, SD_EVENT_OFF);
    /* sd-event coalesces timers to 250 ms by default; curl's "act now"
     * timeouts start every request, so they must fire at once. */
    sd_event_source_set_time_accuracy(glue->timer, 1);
    curl_multi_setopt(glue->multi, CURLMOPT_SOCKETFUNCTION, socket_function);
    curl_multi_setopt(glue->multi, CURLMOPT_SOCKETDATA, glue);
    curl_multi_setopt(glue->multi, CURLMOPT_TIMERFUNCTION, timer_function);
    curl_multi_setopt(glue->multi, CURLMOPT_TIMERDATA, glue);
    *out = glue;
    return 0;
}

void curl_glue_free(curl_glue *glue)
{
    if (!glue)
        return;
    /* curl_multi_cleanup calls the socket function with CURL_POLL_REMOVE for
     * sockets it still caches, which unrefs their io sources. */
    if (glue->multi)
        curl_multi_cleanup(glue->multi);
    for (size_t i = 0; i < glue->n_ios; i++)
        sd_event_source_disable_unref(glue->ios[i]);
    free(glue->ios);
    sd_event_source_disable_unref(glue->timer);
    sd_event_source_disable_unref(glue->now);
    sd_event_unref(glue->event);
    free(glue);
}

int curl_glue_add(curl_glue *glue, curl_glue_job *job)
{
    assert(glue);
    assert(job);
    curl_easy_setopt(job->easy, CURLOPT_PRIVATE, job);
    if (curl_multi_add_handle(glue->multi, job->easy) != CURLM_OK)
        return -EIO;
    return 0;
}

void curl_glue_remove(curl_glue *glue, curl_glue_job *job)
{
    assert(glue);
    assert(job);
    curl_multi_remove_handle(glue->multi, job->easy);
}
