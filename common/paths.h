/* Paths from outside (configuration values, store URLs): the checks every one
 * must pass before it is used, whoever reads it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/* True when some "/"-separated component of path is "." or "..". */
bool act_path_has_dot_component(const char *path);

/* No control character, and shorter than PATH_MAX. Errors show the path. */
int act_path_check_characters(const char *path, act_error *err);

/* An absolute path with no "." or ".." component that passes
 * act_path_check_characters: it names one place, plainly. */
int act_path_check_absolute(const char *path, act_error *err);

/* The length of PATH in an image layout's reference oci:PATH[:TAG], rest
 * being what follows "oci:". A tag never holds '/', so the last ':' starts
 * the tag only when no '/' follows it; otherwise it is the path's own. */
size_t act_image_layout_path_len(const char *rest);
