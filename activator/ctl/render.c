#include "activator/ctl/render.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ctl_table_init(ctl_table *table, const char *const *headers)
{
    memset(table, 0, sizeof(*table));
    for (size_t i = 0; headers[i] && i < CTL_TABLE_MAX_COLUMNS; i++)
        table->headers[table->n_columns++] = headers[i];
}

int ctl_table_add(ctl_table *table, const char *const *cells, const char *const *colors)
{
    if (table->n_rows == table->cap_rows) {
        size_t cap = table->cap_rows ? table->cap_rows * 2 : 16;
        char **grown = realloc(table->cells, cap * table->n_columns * sizeof(char *));
        if (!grown)
            return -ENOMEM;
        table->cells = grown;
        const char **grown_colors =
            realloc(table->colors, cap * table->n_columns * sizeof(const char *));
        if (!grown_colors)
            return -ENOMEM;
        table->colors = grown_colors;
        table->cap_rows = cap;
    }
    size_t base = table->n_rows * table->n_columns;
    for (size_t c = 0; c < table->n_columns; c++) {
        table->cells[base + c] = strdup(cells[c] ? cells[c] : "-");
        table->colors[base + c] = colors ? colors[c] : NULL;
    }
    table->n_rows++;
    return 0;
}

void ctl_table_print(const ctl_table *table, bool color)
{
    size_t width[CTL_TABLE_MAX_COLUMNS] = {0};
    for (size_t c = 0; c < table->n_columns; c++)
        width[c] = strlen(table->headers[c]);
    for (size_t r = 0; r < table->n_rows; r++)
        for (size_t c = 0; c < table->n_columns; c++) {
            const char *cell = table->cells[r * table->n_columns + c];
            size_t len = cell ? strlen(cell) : 0;
            if (len > width[c])
                width[c] = len;
        }
    for (size_t c = 0; c < table->n_columns; c++) {
        bool last = c + 1 == table->n_columns;
        printf("%s%-*s%s%s", color ? CTL_COLOR_BOLD : "", last ? 0 : (int)width[c],
               table->headers[c], color ? CTL_COLOR_RESET : "", last ? "\n" : "  ");
    }
    for (size_t r = 0; r < table->n_rows; r++)
        for (size_t c = 0; c < table->n_columns; c++) {
            size_t i = r * table->n_columns + c;
            const char *cell = table->cells[i] ? table->cells[i] : "-";
            bool last = c + 1 == table->n_columns;
            bool paint = color && table->colors[i];
            /* Padding goes outside the colour codes so columns stay aligned. */
            printf("%s%s%s%*s%s", paint ? table->colors[i] : "", cell,
                   paint ? CTL_COLOR_RESET : "", last ? 0 : (int)(width[c] - strlen(cell)), "",
                   last ? "\n" : "  ");
        }
}

void ctl_table_free(ctl_table *table)
{
    for (size_t i = 0; i < table->n_rows * table->n_columns; i++)
        free(table->cells[i]);
    free(table->cells);
    free(table->colors);
    memset(table, 0, sizeof(*table));
}

void ctl_format_duration(uint64_t usec, char *buf, size_t size)
{
    uint64_t ms = usec / 1000, s = usec / 1000000;
    if (s == 0)
        snprintf(buf, size, "%" PRIu64 "ms", ms);
    else if (s < 60)
        snprintf(buf, size, "%" PRIu64 ".%" PRIu64 "s", s, (ms % 1000) / 100);
    else if (s < 3600)
        snprintf(buf, size, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
    else if (s < 86400)
        snprintf(buf, size, "%" PRIu64 "h%02" PRIu64 "m", s / 3600, (s % 3600) / 60);
    else
        snprintf(buf, size, "%" PRIu64 "d%" PRIu64 "h", s / 86400, (s % 86400) / 3600);
}

void ctl_format_size(uint64_t bytes, char *buf, size_t size)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
    if (bytes < 1024) {
        snprintf(buf, size, "%" PRIu64 " B", bytes);
        return;
    }
    double value = (double)bytes / 1024;
    size_t unit = 0;
    while (value >= 1024 && unit + 1 < sizeof(units) / sizeof(units[0])) {
        value /= 1024;
        unit++;
    }
    snprintf(buf, size, value < 10 ? "%.1f %s" : "%.0f %s", value, units[unit]);
}

const char *ctl_state_color(const char *state)
{
    if (!state)
        return NULL;
    if (strcmp(state, "serving") == 0 || strcmp(state, "ok") == 0)
        return CTL_COLOR_GREEN;
    if (strcmp(state, "failed") == 0 || strcmp(state, "refused") == 0 ||
        strcmp(state, "swap.failed") == 0)
        return CTL_COLOR_RED;
    if (strcmp(state, "parked") == 0 || strcmp(state, "retired") == 0 ||
        strncmp(state, "frozen", 6) == 0)
        return CTL_COLOR_DIM;
    return CTL_COLOR_YELLOW; /* anything in between: waking, parking, ... */
}

const char *ctl_json_text(json_object *value, char *buf, size_t size)
{
    if (!value)
        return "-";
    if (json_object_is_type(value, json_type_string))
        return json_object_get_string(value);
    snprintf(buf, size, "%s", json_object_to_json_string_ext(value, JSON_C_TO_STRING_PLAIN));
    return buf;
}

static void flatten(json_object *object, const char *prefix, ctl_table *table)
{
    json_object_object_foreach(object, key, value)
    {
        char name[256];
        snprintf(name, sizeof(name), "%s%s%s", prefix, *prefix ? "." : "", key);
        if (value && json_object_is_type(value, json_type_object)) {
            flatten(value, name, table);
            continue;
        }
        char buf[512];
        const char *cells[] = {name, ctl_json_text(value, buf, sizeof(buf))};
        ctl_table_add(table, cells, NULL);
    }
}

void ctl_print_object(json_object *object, bool color)
{
    ctl_table table;
    ctl_table_init(&table, (const char *const[]){"KEY", "VALUE", NULL});
    flatten(object, "", &table);
    /* Key/value blocks read better without a header line. */
    size_t width = 0;
    for (size_t r = 0; r < table.n_rows; r++)
        if (strlen(table.cells[r * 2]) > width)
            width = strlen(table.cells[r * 2]);
    for (size_t r = 0; r < table.n_rows; r++)
        printf("%s%-*s%s  %s\n", color ? CTL_COLOR_BOLD : "", (int)width, table.cells[r * 2],
               color ? CTL_COLOR_RESET : "", table.cells[r * 2 + 1]);
    ctl_table_free(&table);
}
