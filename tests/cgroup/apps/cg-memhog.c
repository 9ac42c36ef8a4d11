/* Test app: touches argv[1] MiB (default 1024) one MiB at a time, so a
 * MemoryMax below that OOM-kills it; prints "survived" if it never was. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every chunk stays reachable from here, so no compiler may drop the
 * allocations as unused (clang does that to malloc + memset otherwise). */
static char *volatile chunks[65536];

int main(int argc, char **argv)
{
    long mib = argc > 1 ? atol(argv[1]) : 1024;
    for (long i = 0; i < mib; i++) {
        char *chunk = malloc(1 << 20);
        if (!chunk) {
            printf("malloc-failed\n");
            return 2;
        }
        memset(chunk, (int)(i & 0xff) | 1, 1 << 20);
        chunks[i & 65535] = chunk;
    }
    printf("survived\n");
    return 0;
}
