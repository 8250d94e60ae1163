// common/config_int.h: helpers shared by the sources of the run configuration (config.c:
// defaults, parsing, includes, overrides and output; config_field.c: setting and formatting one
// value, "did you mean" suggestions; config_check.c: cross-field validation; config_table.c: the
// key table, with each key's default text). Calls go one way: config_check.c -> resume_keys.c ->
// config.c -> config_field.c -> config_table.c. Not part of the config API (common/config.h).
#ifndef ATTNLAB_CONFIG_INT_H
#define ATTNLAB_CONFIG_INT_H

#include <stddef.h>

#include "common/config.h"

// The field of `c` that table entry `f` describes.
static inline void* config_field_ptr(Config* c, const ConfigField* f) {
    return (char*)c + f->offset;
}
static inline const void* config_field_cptr(const Config* c, const ConfigField* f) {
    return (const char*)c + f->offset;
}

// Set field f from text, with every check of its type (number syntax, integer, range, choices,
// length, control characters). `where` is "FILE:LINE", "command line", "default" or "config".
// Returns 0, or -1 with err = "WHERE: key 'K': ...".
int config_field_set(Config* c, const ConfigField* f, const char* v, const char* where, char* err,
                     size_t errcap);

// Is f a 0/1 integer key (accepts true/false, yes/no, on/off)?
int config_is_bool_field(const ConfigField* f);

// Numbers as people write them: integers without exponent, others with %g.
void config_fmt_num(char* buf, size_t cap, double x);

#endif
