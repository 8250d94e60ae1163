// common/json.h: a small JSON writer for metrics.jsonl records and .json sidecars. Objects and
// arrays are built into a growable buffer, then written as one line (json_write_line) or as a
// whole file, atomically (json_write_file).
//
//   JsonBuf j = {0};                       // or json_init(&j)
//   json_begin(&j);                        // starts a fresh top-level object (buffer reused)
//   json_int(&j, "step", 10);
//   json_num(&j, "loss", 3.25);
//   json_str(&j, "kind", "head");
//   json_array_begin(&j, "ids");  json_int(&j, NULL, 1);  json_array_end(&j);
//   json_end(&j);
//   json_write_line(&j, f);                // {"step":10,"loss":3.25,"kind":"head","ids":[1]}\n
//   json_free(&j);
//
// Inside an object every value needs a key; inside an array the key must be NULL.
// Conventions:
//  - numbers: json_num prints %.9g (enough to round-trip any float32); json_dbl prints %.17g
//    (round-trips a double). Non-finite numbers (NaN, +-Inf) are written as null, since JSON
//    has no NaN: a reader sees null where training produced a non-finite value.
//  - strings: '"' and '\' are escaped, control characters (< 0x20) become \b \f \n \r \t or
//    \u00XX; valid UTF-8 passes through unchanged; each byte that is not part of a valid UTF-8
//    sequence (stray continuation, truncated or overlong sequence, surrogate, > U+10FFFF)
//    becomes \ufffd. NUL bytes can be passed with json_strn and become \u0000.
#ifndef ATTNLAB_JSON_H
#define ATTNLAB_JSON_H

#include <stddef.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 32

typedef struct {
    char* buf;  // NUL-terminated text built so far
    size_t len; // bytes in buf (excluding the NUL)
    size_t cap;
    int depth;                           // open objects/arrays
    unsigned char count[JSON_MAX_DEPTH]; // per level: 0 before the first member, 1 after
    unsigned char is_array[JSON_MAX_DEPTH];
    int lines; // json_begin_lines: the top-level object's members one per line
} JsonBuf;

void json_init(JsonBuf* j);
void json_free(JsonBuf* j);

// Top-level object: json_begin empties the buffer and opens '{'; json_end closes it.
void json_begin(JsonBuf* j);
void json_end(JsonBuf* j);
// json_begin for a file a person reads (config.json): each member of the top-level object on its
// own line, indented by two spaces, as "key": value (the values themselves stay on one line),
// and the closing brace on a line of its own: {\n  "a": 1,\n  "b": [2,3]\n}
void json_begin_lines(JsonBuf* j);

// Values. `key` is the member name inside an object, NULL inside an array.
void json_int(JsonBuf* j, const char* key, long long v);
void json_num(JsonBuf* j, const char* key, double v);                 // %.9g, non-finite -> null
void json_dbl(JsonBuf* j, const char* key, double v);                 // %.17g, non-finite -> null
void json_str(JsonBuf* j, const char* key, const char* s);            // NULL s -> null
void json_strn(JsonBuf* j, const char* key, const char* s, size_t n); // n bytes, NUL allowed
void json_bool(JsonBuf* j, const char* key, int v);
void json_null(JsonBuf* j, const char* key);
// A number written exactly as `literal` spells it (a constant of the caller's such as "0.0" or
// "1e-05", where %.9g would print 0 and change a file's bytes); it must be a JSON number.
void json_literal(JsonBuf* j, const char* key, const char* literal);

// Nested containers.
void json_object_begin(JsonBuf* j, const char* key);
void json_object_end(JsonBuf* j);
void json_array_begin(JsonBuf* j, const char* key);
void json_array_end(JsonBuf* j);

// Whole arrays in one call (a NULL entry in json_str_array is written as null).
void json_int_array(JsonBuf* j, const char* key, const int* v, size_t n);
void json_num_array(JsonBuf* j, const char* key, const float* v, size_t n);
void json_str_array(JsonBuf* j, const char* key, const char* const* v, size_t n);

// Append the quoted, escaped form of s[0..n) to the buffer, without any separator logic
// (for hand-assembled text).
void json_append_escaped(JsonBuf* j, const char* s, size_t n);

// Write the buffer plus '\n' and fflush. Returns 0, or -1 on a write error (errno is set).
int json_write_line(const JsonBuf* j, FILE* f);
// Write the buffer plus '\n' to `path` atomically (temp file, fsync, rename). Returns 0, or -1
// with a message naming the file in err.
int json_write_file(const JsonBuf* j, const char* path, char* err, size_t errcap);

// Rewrite the JSONL file `path` (atomically) keeping only the records whose "step" is <= last,
// less those of step `last` that hold `redo_key` (e.g. "\"val_loss\":", which a run resumed at
// `last` writes again; NULL: none), and dropping a last line cut without its newline (a crash or
// a full disk mid-write): a resumed run then appends after the step it resumed from. A missing
// file is left alone. 0, or -1 with err naming the file (the file is then unchanged).
int jsonl_keep_steps(const char* path, long last, const char* redo_key, char* err, size_t errcap);

#endif
