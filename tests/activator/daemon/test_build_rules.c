/* Unit tests of two pure rules of the daemon: which build a start runs under
 * the claim's pin (pin_choice.h), and how an executable's "#!" line is read
 * (shebang.h). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "activator/daemon/wake/pin_choice.h"
#include "activator/daemon/wake/shebang.h"

static const char *digest_a = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
static const char *digest_b = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

static claim pinned(const char *version, const char *digest)
{
    claim c = {0};
    c.has_pin = true;
    snprintf(c.pin.version, sizeof(c.pin.version), "%s", version);
    snprintf(c.pin.digest, sizeof(c.pin.digest), "%s", digest);
    return c;
}

static void pin_choice_follows_the_table(void **state)
{
    rel_pin pin;
    claim none = {0};
    assert_int_equal(ad_pin_choose(&none, &pin), AD_PIN_NONE);
    assert_false(ad_pin_mismatch(&none, "v9", digest_b));

    claim c = pinned("v2", digest_b);
    assert_int_equal(ad_pin_choose(&c, &pin), AD_PIN_EXACT);
    assert_string_equal(pin.version, "v2");
    assert_false(ad_pin_mismatch(&c, "v2", digest_b));
    assert_true(ad_pin_mismatch(&c, "v2", digest_a));
    assert_true(ad_pin_mismatch(&c, "v1", digest_b));

    /* Failed, with nothing to stand in: nothing may run. */
    snprintf(c.pin.failure_reason, sizeof(c.pin.failure_reason), "crashed");
    assert_int_equal(ad_pin_choose(&c, &pin), AD_PIN_FAILED);
    assert_string_equal(pin.version, "");
    assert_true(ad_pin_mismatch(&c, "v2", digest_b));

    /* Failed, with the build that served: that one, never the pin. */
    snprintf(c.pin.fallback_version, sizeof(c.pin.fallback_version), "v1");
    snprintf(c.pin.fallback_digest, sizeof(c.pin.fallback_digest), "%s", digest_a);
    assert_int_equal(ad_pin_choose(&c, &pin), AD_PIN_FALLBACK);
    assert_string_equal(pin.version, "v1");
    assert_string_equal(pin.digest, digest_a);
    assert_false(ad_pin_mismatch(&c, "v1", digest_a));
    assert_true(ad_pin_mismatch(&c, "v2", digest_b));
}

static int parse(const char *text, char out[AD_SHEBANG_MAX], act_error *err)
{
    return ad_shebang_parse(text, strlen(text), out, err);
}

static void shebang_names_the_interpreter_or_says_what_is_wrong(void **state)
{
    char interpreter[AD_SHEBANG_MAX];
    act_error err = {0};
    assert_int_equal(parse("\x7f" "ELF\x02\x01", interpreter, &err), 0);
    assert_int_equal(parse("#", interpreter, &err), 0);
    assert_int_equal(parse("#!/bin/sh\nexec true\n", interpreter, &err), 1);
    assert_string_equal(interpreter, "/bin/sh");
    assert_int_equal(parse("#! \t/usr/bin/env python3 -u\n", interpreter, &err), 1);
    assert_string_equal(interpreter, "/usr/bin/env");
    assert_int_equal(parse("#!/bin/sh", interpreter, &err), 1); /* no newline: the kernel too */

    assert_int_equal(parse("#!\n", interpreter, &err), -ENOEXEC);
    assert_non_null(strstr(err.message, "names no interpreter"));
    assert_int_equal(parse("#!python3\n", interpreter, &err), -ENOEXEC);
    assert_non_null(strstr(err.message, "\"python3\" by a relative path"));

    char longer[AD_SHEBANG_MAX + 16];
    memset(longer, 'x', sizeof(longer));
    memcpy(longer, "#!/", 3);
    assert_int_equal(ad_shebang_parse(longer, AD_SHEBANG_MAX - 1, interpreter, &err),
                     -ENAMETOOLONG);
    assert_non_null(strstr(err.message, "longer than the kernel reads"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pin_choice_follows_the_table),
        cmocka_unit_test(shebang_names_the_interpreter_or_says_what_is_wrong),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
