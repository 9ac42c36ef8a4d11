/* Scope-bound ownership of json-c objects and parsers.
 *
 * Apart from common/cleanup.h because common/ itself does not link json-c:
 * only the layers that already depend on it (release/, claims/ and parts of
 * activator/) include this header. */
#pragma once

#include <json-c/json.h>

#include "common/cleanup.h"

/* json_object_put drops one reference; an object added to another with
 * json_object_object_add or json_object_array_add belongs to its parent and
 * must not be put again (TAKE_PTR it into the add). */
DEFINE_TRIVIAL_CLEANUP_FUNC(json_object *, json_object_put)
DEFINE_TRIVIAL_CLEANUP_FUNC(json_tokener *, json_tokener_free)
