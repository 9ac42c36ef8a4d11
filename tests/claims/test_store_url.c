/* claims_parse_url: the one grammar of a claim store URL, shared by Store= and
 * claims_store_open. Every accepted form and what it parses to, and for each
 * refusal a message that shows the URL safely and says what to write. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "claims/claims.h"
#include "common/cleanup.h"

static claims_url url;

static void parse_ok(const char *text)
{
    act_error err = {0};
    if (claims_parse_url(text, &url, &err) != 0)
        fail_msg("%s was refused: %s", text, err.message);
}

static void dir_urls_name_an_absolute_directory(void **state)
{
    (void)state;
    parse_ok("dir:///var/lib/activator/claims");
    assert_int_equal(url.kind, CLAIMS_URL_DIR);
    assert_string_equal(url.path, "/var/lib/activator/claims");
    assert_int_equal(url.n_endpoints, 0);
}

static void etcd_urls_list_endpoints_then_a_prefix(void **state)
{
    (void)state;
    /* The README's fleet example. */
    parse_ok("etcd://10.0.0.5:2379,10.0.0.6:2379/activator");
    assert_int_equal(url.kind, CLAIMS_URL_ETCD);
    assert_int_equal(url.n_endpoints, 2);
    assert_string_equal(url.endpoints[0], "10.0.0.5:2379");
    assert_string_equal(url.endpoints[1], "10.0.0.6:2379");
    assert_string_equal(url.prefix, "/activator");

    parse_ok("etcd://etcd-1.internal:2379,[::1]:2379,[fd00::5]:23790/fleet/a.b_c-d//");
    assert_int_equal(url.n_endpoints, 3);
    assert_string_equal(url.endpoints[0], "etcd-1.internal:2379");
    assert_string_equal(url.endpoints[1], "[::1]:2379");
    assert_string_equal(url.endpoints[2], "[fd00::5]:23790");
    assert_string_equal(url.prefix, "/fleet/a.b_c-d"); /* trailing slashes dropped */

    char sixteen[512] = "etcd://";
    for (int i = 0; i < CLAIMS_URL_ENDPOINTS_MAX; i++)
        snprintf(sixteen + strlen(sixteen), sizeof(sixteen) - strlen(sixteen), "%sh%d:1",
                 i ? "," : "", i);
    strcat(sixteen, "/p");
    parse_ok(sixteen);
    assert_int_equal(url.n_endpoints, CLAIMS_URL_ENDPOINTS_MAX);
}

/* Each refusal names the URL and ends with "(write ...)". */
static void assert_refused(const char *text, const char *says)
{
    act_error err = {0};
    url.kind = CLAIMS_URL_ETCD;
    int r = claims_parse_url(text, &url, &err);
    if (r == 0)
        fail_msg("%s was accepted", text);
    assert_true(r == -EINVAL || r == -ENAMETOOLONG);
    assert_int_equal(url.kind, CLAIMS_URL_DIR); /* zeroed */
    assert_non_null(strstr(err.message, "claim store URL \""));
    if (!strstr(err.message, says))
        fail_msg("%s: \"%s\" does not say \"%s\"", text, err.message, says);
    size_t len = strlen(err.message);
    assert_int_equal(err.message[len - 1], ')');
    assert_non_null(strstr(err.message, "(write "));
    for (const unsigned char *p = (const unsigned char *)err.message; *p; p++)
        assert_true(*p >= 0x20 && *p < 0x7f);
}

static void bad_urls_are_refused_with_what_to_write(void **state)
{
    (void)state;
    static const struct {
        const char *url, *says;
    } bad[] = {
        {"", "neither dir:// nor etcd://"},
        {"/var/lib/claims", "neither"},
        {"s3://bucket", "neither"},
        {"http://10.0.0.5:2379/activator", "neither"},
        {"dir://relative/path", "not an absolute path"},
        {"dir://", "not an absolute path"},
        {"dir:///a/../b", ". or .. component"},
        {"dir:///a/./b", ". or .. component"},
        {"dir:///a\nb", "control character"},
        {"etcd://", "empty endpoint"},
        {"etcd:///activator", "empty endpoint"},
        {"etcd://a:1,,b:2/p", "empty endpoint"},
        {"etcd://a:1,/p", "empty endpoint"},
        {"etcd://127.0.0.1:2379", "no key prefix"},
        {"etcd://127.0.0.1:2379/", "no key prefix"},
        {"etcd://127.0.0.1/p", "not HOST:PORT"},
        {"etcd://[::1]/p", "not HOST:PORT"},
        {"etcd://h:99999/x", "port is not a number from 1 to 65535"},
        {"etcd://h:0/x", "port"},
        {"etcd://h:+1/x", "port"},
        {"etcd://h:/x", "port"},
        {"etcd://user@h:1/x", "host is not"},
        {"etcd://-h:1/x", "host is not"},
        {"etcd://[nonsense]:1/x", "host is not"},
        {"etcd://h_1:1/x", "host is not"},
        {"etcd://h:1/../x", "\"..\" in its key prefix"},
        {"etcd://h:1/a//b", "\"\" in its key prefix"},
        {"etcd://h:1/a b", "\"a b\" in its key prefix"},
        {"etcd://h:1/.hidden", "in its key prefix"},
        {"etcd://h:1/a?x=1", "in its key prefix"},
        {"etcd://h:1/\x1b[31mred", "\"\\x1b[31mred\" in its key prefix"},
        {"etcd://h\xff:1/x", "\"h\\xff:1\""},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        assert_refused(bad[i].url, bad[i].says);

    char seventeen[512] = "etcd://";
    for (int i = 0; i <= CLAIMS_URL_ENDPOINTS_MAX; i++)
        snprintf(seventeen + strlen(seventeen), sizeof(seventeen) - strlen(seventeen), "%sh%d:1",
                 i ? "," : "", i);
    strcat(seventeen, "/p");
    assert_refused(seventeen, "more than 16 endpoints");

    char long_prefix[400] = "etcd://h:1/";
    for (int i = 0; i < 30; i++)
        strcat(long_prefix, "abcdefghi/");
    strcat(long_prefix, "x");
    assert_refused(long_prefix, "longer than 256");
}

/* claims_store_open parses with the same grammar: what it refuses, it
 * refuses with the parser's message and opens nothing. */
static void store_open_uses_the_same_parser(void **state)
{
    (void)state;
    claim_store *store = NULL;
    act_error err = {0};
    assert_int_equal(claims_store_open("etcd://a:1,,b:2/p", NULL, &store, &err), -EINVAL);
    assert_null(store);
    assert_non_null(strstr(err.message, "empty endpoint"));
    err = (act_error){0};
    assert_int_equal(claims_store_open("dir:///tmp/../etc", NULL, &store, &err), -EINVAL);
    assert_null(store);
    assert_non_null(strstr(err.message, ". or .. component"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dir_urls_name_an_absolute_directory),
        cmocka_unit_test(etcd_urls_list_endpoints_then_a_prefix),
        cmocka_unit_test(bad_urls_are_refused_with_what_to_write),
        cmocka_unit_test(store_open_uses_the_same_parser),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
