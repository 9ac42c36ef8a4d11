/* A real registry for tests: Debian's docker-registry (distribution 2.8)
 * on a free loopback port with its storage in a temporary directory,
 * optionally with TLS (the test CA of tests/tls/make-certs.sh) and an
 * htpasswd user, stopped and removed afterwards. */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#include "common/error.h"

#define REG_HARNESS_BINARY "/usr/bin/docker-registry"
#define REG_HARNESS_USER "puller"
#define REG_HARNESS_PASSWORD "s3cret-pass"

typedef struct token_issuer token_issuer;

typedef struct reg_harness {
    pid_t pid;
    char dir[64]; /* /tmp/act-registry-XXXXXX */
    int port;
    char address[64]; /* "127.0.0.1:<port>" */
    bool tls, auth;      /* auth: the user, by htpasswd or (token) by the token service */
    token_issuer *token; /* the token service of a registry with token auth */
    char certs_dir[128]; /* <dir>/certs.d, with <address>/ca.crt under TLS */
    char auth_file[128]; /* <dir>/auth.json (0600), naming the user under auth */
    char storage[128];   /* the registry's filesystem storage */
} reg_harness;

/* True when docker-registry and skopeo are installed. */
bool reg_harness_available(void);

/* Starts a registry and waits until it answers /v2/. */
int reg_harness_start(reg_harness *h, bool tls, bool auth, act_error *err);
/* The same, with deletion allowed or not (reg_harness_start allows it). */
int reg_harness_start_with(reg_harness *h, bool tls, bool auth, bool deletes, act_error *err);
/* A registry over http with token auth: its token service is the test's
 * own (token_issuer.h), which gives tokens to the user only. */
int reg_harness_start_token(reg_harness *h, act_error *err);

/* Pushes the layout's image (oci:LAYOUT:TAG) to REPOSITORY:TAG with skopeo;
 * extra_args (may be NULL) go to skopeo copy as they are ("--format v2s2"
 * for a Docker manifest, "--dest-compress-format zstd" for zstd layers). */
int reg_harness_push(const reg_harness *h, const char *layout, const char *tag,
                     const char *repository, act_error *err);
int reg_harness_push_with(const reg_harness *h, const char *layout, const char *tag,
                          const char *repository, const char *extra_args, act_error *err);

/* Stops the registry's process and starts it again on the same port,
 * configuration and storage (resume waits until it answers): a registry
 * outage. */
void reg_harness_pause(reg_harness *h);
int reg_harness_resume(reg_harness *h, act_error *err);

void reg_harness_stop(reg_harness *h);
