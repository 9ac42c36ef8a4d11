/* A session with one registry repository: the OCI distribution API's
 * requests over libcurl (HTTP/2 where offered, redirects followed), with
 * the registry's credentials from a containers-auth.json(5) file, its CA
 * from certs.d, and a 401 answered as its WWW-Authenticate challenge asks:
 * Basic with the credentials, or Bearer with a token from the realm it
 * names (asked with the credentials when there are any). Private to image/. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <curl/curl.h>
#include <openssl/evp.h>

#include "image/internal.h"

typedef struct img_session {
    CURL *easy;
    img_registry_ref ref;
    const img_registry_options *options;
    char base[600];           /* https://REGISTRY or http://REGISTRY */
    char userpwd[1024];       /* from the auth file, "" for none */
    char authorization[4200]; /* the header that answered the last challenge */
    act_error *err;
} img_session;

/* What one request brought back: the body in memory (manifests, tokens) or
 * into a file hashed on the way (blobs, fd >= 0 with sha), and the headers
 * the API reads. */
typedef struct img_answer {
    char *body;
    size_t len, cap, max;
    int fd;          /* >= 0: the body goes here */
    EVP_MD_CTX *sha; /* with fd */
    uint64_t written;
    bool too_big;
    char content_type[160];
    char challenge[1024];
    char location[2048];
    char digest[160]; /* Docker-Content-Digest */
    img_progress *progress; /* with fd: the bytes counted there too */
} img_answer;

/* A request: a method, a path under /v2/<repository>/ (or an absolute URL,
 * as an upload's Location names), and a body from memory or from a file. */
typedef struct img_request {
    const char *method; /* GET, HEAD, POST, PUT, PATCH, DELETE */
    const char *path;
    const char *accept;       /* a header line, or NULL */
    const char *content_type; /* a header line, or NULL */
    const void *data;         /* a body in memory, data_len bytes */
    size_t data_len;
    int fd; /* or the body from this file (-1: none): length bytes from offset */
    off_t offset;
    uint64_t length;
} img_request;

/* Opens a session with the repository of reference (docker://REGISTRY/REPO
 * with or without a tag or digest); err is where every later error goes. */
int img_session_open(img_session *s, const char *reference, const img_registry_options *options,
                     act_error *err);
void img_session_close(img_session *s);

/* Sends rq, answering one 401 challenge; the HTTP status, or -errno with
 * the error set. */
long img_session_send(img_session *s, const img_request *rq, img_answer *a);

/* A GET of path under the repository. */
long img_session_get(img_session *s, const char *path, const char *accept, img_answer *a);
