/* A real etcd for tests and benchmarks: started on free loopback ports with a
 * temporary data directory, stopped and removed afterwards. Never touches a
 * system etcd (which Debian's etcd-server may run on 2379). */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#include "common/error.h"

#define ETCD_HARNESS_BINARY "/usr/bin/etcd"

typedef struct etcd_harness {
    pid_t pid;                /* 0 when not running */
    char dir[PATH_MAX];       /* temp dir holding data/ and etcd.log */
    int client_port, peer_port;
    char endpoint[64];        /* "127.0.0.1:<client_port>" */
    char url_prefix[96];      /* "etcd://127.0.0.1:<port>" */
    /* With TLS (etcd_harness_start_tls): clients must present a certificate
     * of the test CA; the files are in certs/ (tests/tls/make-certs.sh). */
    bool tls;
    char ca_file[PATH_MAX + 24], cert_file[PATH_MAX + 24], key_file[PATH_MAX + 24];
    char other_cert_file[PATH_MAX + 24], other_key_file[PATH_MAX + 24],
        other_ca_file[PATH_MAX + 24];
    /* A cluster's member (etcd_harness_start_cluster): its name and every
     * member's peer URL; "" for a single etcd. */
    char name[16];
    char cluster[512];
} etcd_harness;

/* True when the etcd binary is installed; tests skip (exit 77) otherwise. */
bool etcd_harness_available(void);
/* For a benchmark's main: 0 when etcd is installed, else 77 (skipped) after
 * saying so on stderr as who. */
int etcd_harness_require(const char *who);
/* Picks free ports (binding port 0), makes the temp dir, starts etcd and
 * waits (up to 20 s) until it answers a range request. */
int etcd_harness_start(etcd_harness *h, act_error *err);
/* The same over https, requiring client certificates of a CA made for the
 * run (fresh certificates each time, by tests/tls/make-certs.sh). */
int etcd_harness_start_tls(etcd_harness *h, act_error *err);
/* Starts n members of one cluster on loopback (m0, m1, ...), each with its
 * own ports and temp dir, and waits until every one answers. */
int etcd_harness_start_cluster(etcd_harness *members, size_t n, act_error *err);
/* SIGTERM and wait; the data dir and ports are kept for a restart. */
void etcd_harness_stop(etcd_harness *h);
/* Starts etcd again on the same ports and data. */
int etcd_harness_restart(etcd_harness *h, act_error *err);
/* Stops etcd if running and removes the temp dir. */
void etcd_harness_destroy(etcd_harness *h);
/* POSTs body to path on the harness etcd with plain libcurl (no claims code),
 * for planting raw values and for admin calls. Returns the HTTP status, or
 * negative; *response (may be NULL) gets the malloc'd body. */
long etcd_harness_post(const etcd_harness *h, const char *path, const char *body,
                       const char *token, char **response);
/* How many gRPC calls etcd has started (its /metrics counter
 * grpc_server_started_total: every JSON gateway request is one) of method
 * ("Range", "LeaseTimeToLive"), or of every method when method is NULL;
 * -1 when /metrics does not answer. */
long long etcd_harness_grpc_calls(const etcd_harness *h, const char *method);
/* etcd's /metrics as text (malloc'd), or NULL when it does not answer. */
char *etcd_harness_metrics(const etcd_harness *h);
/* Adds up the samples of metric in a Prometheus text exposition whose
 * labels hold label (every sample when label is NULL; a metric without
 * labels only then). */
double etcd_harness_metric(const char *text, const char *metric, const char *label);
