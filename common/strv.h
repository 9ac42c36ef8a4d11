/* NULL-terminated arrays of malloc'd strings: argv and environment lists. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common/cleanup.h"

/* Frees every string and the array; NULL is fine. */
void act_strv_free(char **strv);
DEFINE_TRIVIAL_CLEANUP_FUNC(char **, act_strv_free)

/* The number of strings before the NULL; 0 for a NULL array. */
size_t act_strv_length(char *const *strv);

/* The same strings in the same order; a NULL array equals an empty one. */
bool act_strv_equal(char *const *a, char *const *b);

/* A copy of strv (NULL for NULL); NULL when out of memory too, so a caller
 * with a non-NULL strv checks the result. */
char **act_strv_copy(char *const *strv);
