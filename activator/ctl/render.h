/* Human output for activatorctl: aligned tables, humanized durations and
 * sizes, colour only when stdout is a terminal. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#define CTL_TABLE_MAX_COLUMNS 12

typedef struct ctl_table {
    size_t n_columns, n_rows, cap_rows;
    const char *headers[CTL_TABLE_MAX_COLUMNS];
    char **cells;        /* n_rows * n_columns, malloc'd strings */
    const char **colors; /* per cell ANSI colour or NULL */
} ctl_table;

void ctl_table_init(ctl_table *table, const char *const *headers);
/* Adds a row of n_columns strings (copied); colors may be NULL. */
int ctl_table_add(ctl_table *table, const char *const *cells, const char *const *colors);
void ctl_table_print(const ctl_table *table, bool color);
void ctl_table_free(ctl_table *table);

/* "3d4h", "2m05s", "850ms". */
void ctl_format_duration(uint64_t usec, char *buf, size_t size);
/* "512 B", "12.3 MiB". */
void ctl_format_size(uint64_t bytes, char *buf, size_t size);
/* ANSI colour for a host state ("serving" green, "failed" red ...), or NULL. */
const char *ctl_state_color(const char *state);

/* A JSON value as display text: strings bare, null as "-", others as JSON. */
const char *ctl_json_text(json_object *value, char *buf, size_t size);

/* Prints an object as aligned "key  value" lines, nested objects flattened
 * with dotted keys ("holder.box"). */
void ctl_print_object(json_object *object, bool color);

#define CTL_COLOR_RESET "\033[0m"
#define CTL_COLOR_BOLD "\033[1m"
#define CTL_COLOR_RED "\033[31m"
#define CTL_COLOR_GREEN "\033[32m"
#define CTL_COLOR_YELLOW "\033[33m"
#define CTL_COLOR_DIM "\033[2m"
