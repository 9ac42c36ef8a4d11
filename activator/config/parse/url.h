/* NNG endpoint URLs in the daemon's configuration. (The claim store's Store=
 * is claims_parse_url's, in claims/claims.h: the grammar of what opens it.) */
#pragma once

#include "common/error.h"

/* Which NNG transports a key accepts. */
enum {
    CFG_URL_IPC = 1 << 0,     /* ipc:///ABSOLUTE/PATH */
    CFG_URL_TCP = 1 << 1,     /* tcp://ADDR:PORT */
    CFG_URL_TLS_TCP = 1 << 2, /* tls+tcp://ADDR:PORT */
};

/* An NNG listen URL with one of the allowed transports. ADDR is numeric
 * (127.0.0.1, [::1]) or a host name; PORT is 1..65535. */
int cfg_parse_nng_url(const char *text, unsigned allowed, act_error *err);
