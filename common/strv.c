#include "common/strv.h"

#include <stdlib.h>
#include <string.h>

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

bool act_strv_equal(char *const *a, char *const *b)
{
    size_t n = act_strv_length(a);
    if (n != act_strv_length(b))
        return false;
    for (size_t i = 0; i < n; i++)
        if (strcmp(a[i], b[i]) != 0)
            return false;
    return true;
}

char **act_strv_copy(char *const *strv)
{
    if (!strv)
        return NULL;
    size_t n = act_strv_length(strv);
    char **copy = calloc(n + 1, sizeof(char *));
    for (size_t i = 0; copy && i < n; i++)
        if (!(copy[i] = strdup(strv[i]))) {
            act_strv_free(copy);
            return NULL;
        }
    return copy;
}
