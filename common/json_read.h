// common/json_read.h: a small strict JSON reader (RFC 8259 syntax, nesting depth <= 32) for
// safetensors headers and config.json; the writer beside it is common/json.h. A document is
// parsed into a tree of values:
//
//   Jv root;
//   char err[300];
//   if (json_parse(&root, text, len, err, sizeof err)) ... // err: "what at byte N"
//   const Jv* v = jv_get(&root, "n_layer");                 // NULL if absent or not an object
//   if (v && v->t == JV_NUM && v->is_uint) ... v->u ...
//   jv_free(&root);
//
// Numbers keep their double value and, when they are non-negative integers that fit a uint64
// exactly, that integer (is_uint, u). Strings are NUL-terminated (escapes decoded to UTF-8; raw
// control characters, unpaired surrogates and \u0000 are rejected; other raw bytes pass through
// unchecked). Duplicate keys are kept in order; jv_get returns the first.
#ifndef ATTNLAB_JSON_READ_H
#define ATTNLAB_JSON_READ_H

#include <stddef.h>
#include <stdint.h>

#define JSON_READ_MAX_DEPTH 32

typedef enum { JV_NULL, JV_BOOL, JV_NUM, JV_STR, JV_ARR, JV_OBJ } JvType;

typedef struct Jv {
    JvType t;
    int b;
    double num;
    int is_uint; // a non-negative integer that fits uint64 exactly
    uint64_t u;
    char* s;          // JV_STR (NUL-terminated; strings holding NUL are rejected)
    struct Jv* items; // JV_ARR / JV_OBJ values
    char** keys;      // JV_OBJ keys
    int n, cap;
} Jv;

// Parse a whole document of n bytes; trailing white space is allowed (safetensors pads its
// header with spaces). 0, or -1 with err = "what is wrong at byte N" (v is then empty).
int json_parse(Jv* v, const char* text, size_t n, char* err, size_t errcap);
void jv_free(Jv* v);
// Member `key` of an object (the first one if repeated); NULL if absent or o is not an object.
const Jv* jv_get(const Jv* o, const char* key);

#endif
