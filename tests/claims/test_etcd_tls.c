/* The etcd store over TLS, against a real etcd that serves https and
 * requires client certificates of a CA made for the run: with the right
 * CA, certificate and key, claims are written and read; with a client
 * certificate of another CA, with another CA for the server, or over plain
 * http, every call fails with an error that names the endpoint and what
 * went wrong. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "etcd_harness.h"
#include "store_fixture.h"

static etcd_harness harness;

static claim_store *open_with(const char *prefix, const claims_store_options *options)
{
    char url[256];
    snprintf(url, sizeof(url), "%s/%s", harness.url_prefix, prefix);
    claim_store *store = NULL;
    act_error err = {0};
    if (claims_store_open(url, options, &store, &err) < 0)
        fail_msg("open %s: %s", url, err.message);
    return store;
}

static void with_the_test_ca_and_a_client_certificate_claims_work(void **state)
{
    claims_store_options options = {.timeout_ms = 5000,
                                     .ca_file = harness.ca_file,
                                     .cert_file = harness.cert_file,
                                     .key_file = harness.key_file};
    claim_store *store = open_with("tls-ok", &options);
    act_error err = {0};
    claim c = fixture_claim("web1", 1), got;
    uint64_t rev = 0;
    assert_int_equal(claims_read(store, "web1", &got, &err), 0);
    assert_int_equal(claims_cas(store, "web1", 0, &c, &rev, NULL, &err), 0);
    c.holder.session = 2;
    assert_int_equal(claims_cas(store, "web1", rev, &c, &rev, NULL, &err), 0);
    assert_int_equal(claims_read(store, "web1", &got, &err), 1);
    assert_int_equal(got.revision, rev);
    assert_int_equal(got.holder.session, 2);
    claims_store_free(store);
}

static void expect_refused(const claims_store_options *options, const char *prefix,
                           const char *what, const char *hint)
{
    claim_store *store = open_with(prefix, options);
    act_error err = {0};
    claim got;
    int r = claims_read(store, "web1", &got, &err);
    if (r >= 0)
        fail_msg("a read with %s succeeded", what);
    if (!strstr(err.message, harness.endpoint))
        fail_msg("the error for %s does not name the endpoint %s: %s", what, harness.endpoint,
                 err.message);
    if (!strstr(err.message, hint))
        fail_msg("the error for %s does not say \"%s\": %s", what, hint, err.message);
    print_message("  %s: %s\n", what, err.message);
    claims_store_free(store);
}

static void a_client_of_another_ca_is_refused(void **state)
{
    claims_store_options options = {.timeout_ms = 3000,
                                     .ca_file = harness.ca_file,
                                     .cert_file = harness.other_cert_file,
                                     .key_file = harness.other_key_file};
    expect_refused(&options, "tls-other-client", "a client certificate of another CA",
                   "signed this client certificate");
}

static void a_server_of_another_ca_is_not_trusted(void **state)
{
    claims_store_options options = {.timeout_ms = 3000,
                                     .ca_file = harness.other_ca_file,
                                     .cert_file = harness.cert_file,
                                     .key_file = harness.key_file};
    expect_refused(&options, "tls-other-ca", "another CA for the server",
                   "it must have signed etcd's certificate");
}

static void plain_http_to_a_tls_etcd_fails(void **state)
{
    claims_store_options options = {.timeout_ms = 3000};
    expect_refused(&options, "tls-plain", "plain http", "if it serves https");
}

static int setup(void **state)
{
    act_error err = {0};
    if (etcd_harness_start_tls(&harness, &err) < 0) {
        fprintf(stderr, "cannot start etcd with TLS: %s\n", err.message);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    etcd_harness_destroy(&harness);
    return 0;
}

int main(void)
{
    if (!etcd_harness_available()) {
        fprintf(stderr, "skipped: %s is not installed (Debian package etcd-server)\n",
                ETCD_HARNESS_BINARY);
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(with_the_test_ca_and_a_client_certificate_claims_work),
        cmocka_unit_test(a_client_of_another_ca_is_refused),
        cmocka_unit_test(a_server_of_another_ca_is_not_trusted),
        cmocka_unit_test(plain_http_to_a_tls_etcd_fails),
    };
    return cmocka_run_group_tests_name("etcd over TLS", tests, setup, teardown);
}
