/* A tiny build for the release tests: it prints which version it is, so a
 * test that execs a resolved fd can tell which build actually ran. The
 * version is baked in at compile time, so two versions differ in content. */
#include <stdio.h>

int main(void)
{
    printf("rel-test-app %s\n", APP_VERSION);
    return 0;
}
