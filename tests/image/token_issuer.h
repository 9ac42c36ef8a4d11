/* The registry's token service, for the tests: Debian packages none, so
 * this is the one part of the registry tests that is ours. It answers GET
 * /token?service=S&scope=repository:NAME:ACTIONS (any number of scopes) as
 * the distribution token protocol asks: a JWT signed ES256 with the test's
 * key, its certificate in the header's x5c (the registry trusts it through
 * its rootcertbundle), granting every action asked for, and only to the
 * user and password it was given (Basic); anyone else gets 401. */
#pragma once

#include "common/error.h"

#define TOKEN_ISSUER_NAME "activator-test-issuer"
#define TOKEN_ISSUER_SERVICE "activator-test-registry"

typedef struct token_issuer token_issuer;

/* Makes an EC P-256 key and a self-signed certificate for it in dir
 * (issuer.key, issuer.crt: the registry's rootcertbundle), and serves on
 * a free loopback port; *realm gets the URL to give the registry. */
int token_issuer_start(const char *dir, const char *user, const char *password, token_issuer **out,
                       char *realm, size_t realm_size, act_error *err);

/* How many tokens it gave, and how many requests it refused. */
unsigned token_issuer_given(const token_issuer *issuer);
unsigned token_issuer_refused(const token_issuer *issuer);

void token_issuer_stop(token_issuer *issuer);
