/* common/closer.h against a socket whose last close lingers: a plain
 * close() waits out the linger (the attack works: the positive control),
 * act_close_foreign and act_close_later return at once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "common/closer.h"
#include "tests/common/lingering.h"

#define LINGER_SEC 2
/* Far above what a close that does not wait takes on a loaded machine,
 * far below the linger. */
#define QUICK_USEC (LINGER_SEC * 1000 * 1000 / 2)

static uint64_t close_with(void (*how)(int), int *listener)
{
    int fd = lingering_socket(LINGER_SEC, listener);
    assert_true(fd >= 0);
    uint64_t start = act_now_usec();
    how(fd);
    return act_now_usec() - start;
}

static void plain_close(int fd)
{
    close(fd);
}

static void a_plain_close_lingers(void **state)
{
    (void)state;
    int listener = -1;
    uint64_t took = close_with(plain_close, &listener);
    close(listener);
    /* The kernel's linger timer, not the machine's speed. */
    assert_true(took >= QUICK_USEC);
}

static void the_closer_does_not_wait(void **state)
{
    (void)state;
    int listener = -1;
    assert_true(close_with(act_close_foreign, &listener) < QUICK_USEC);
    close(listener);
    /* Without touching the socket: the closer thread waits, not we. */
    assert_true(close_with(act_close_later, &listener) < QUICK_USEC);
    close(listener);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_plain_close_lingers),
        cmocka_unit_test(the_closer_does_not_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
