#include "common/strv.h"

#include <stdlib.h>

void act_strv_free(char **strv)
{
    for (char **p = strv; p && *p; p++)
        free(*p);
    free(strv);
}

size_t act_strv_length(char *const *strv)
{
    size_t n = 0;
    while (strv && strv[n])
        n++;
    return n;
}
