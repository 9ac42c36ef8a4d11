/* libcurl's multi interface driven by an sd-event loop: curl tells us which
 * sockets and which timeout it wants watched (CURLMOPT_SOCKETFUNCTION,
 * CURLMOPT_TIMERFUNCTION), the loop watches them, and we hand readiness back
 * with curl_multi_socket_action. Nothing blocks the loop. This is the
 * pattern systemd's importd uses; the code is our own. */
#pragma once

#include <curl/curl.h>
#include <systemd/sd-event.h>

typedef struct curl_glue curl_glue;
typedef struct curl_glue_job curl_glue_job;

/* Called on the loop when a transfer finished (or failed). The easy handle
 * has already been removed from the multi handle, so the callback may reuse
 * it, free it, or start more transfers. */
typedef void (*curl_glue_done_fn)(curl_glue_job *job, CURLcode result);

/* Embed this in the request; its address is the easy handle's private data. */
struct curl_glue_job {
    curl_glue_done_fn done;
    CURL *easy;
};

int curl_glue_new(sd_event *event, curl_glue **out);
void curl_glue_free(curl_glue *glue);
sd_event *curl_glue_event(curl_glue *glue);
/* Starts job->easy on the glue; job->done runs when it ends. */
int curl_glue_add(curl_glue *glue, curl_glue_job *job);
/* Stops job->easy without calling done. Never call it from inside a curl
 * callback (a write callback); return an error from the callback instead. */
void curl_glue_remove(curl_glue *glue, curl_glue_job *job);
