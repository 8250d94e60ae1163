// data/tokenizer.h: tokenizers behind one interface.
//   gpt2: GPT-2 byte-level BPE, ids identical to OpenAI's encoder and tiktoken "gpt2". The
//         vocabulary is rebuilt from vocab.bpe alone (ids 0-255: bytes in bytes_to_unicode order,
//         merge line i -> id 256+i, 50256 = <|endoftext|>).
//   byte: 256 byte ids plus EOT = 256 (vocab 257), for character-level experiments.
#ifndef ATTNLAB_TOKENIZER_H
#define ATTNLAB_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

typedef struct Tokenizer Tokenizer;

// kind: "gpt2" (reads DIR/vocab.bpe) or "byte" (dir unused). NULL with err on failure; err names
// the file and line for a malformed vocab.bpe.
Tokenizer* tokenizer_load(const char* kind, const char* dir, char* err, size_t errcap);
void tokenizer_free(Tokenizer* t);

int tokenizer_vocab_size(const Tokenizer* t); // 50257 or 257
int tokenizer_eot(const Tokenizer* t);        // 50256 or 256
const char* tokenizer_kind(const Tokenizer* t);

// Encoding is not thread-safe: a Tokenizer keeps a cache of encoded pieces (use one per thread).
// Encode n bytes of text. If allow_special, the literal "<|endoftext|>" becomes the EOT id;
// otherwise it is encoded as ordinary text (tiktoken's default for encode_ordinary).
// Returns the number of ids, written to *ids (malloc'd, caller frees).
size_t tokenizer_encode(Tokenizer* t, const char* text, size_t n, int allow_special, int** ids);

// Bytes of one token (not NUL-terminated); *len gets the length. NULL for an invalid id.
const unsigned char* tokenizer_token_bytes(const Tokenizer* t, int id, size_t* len);

// Decode ids to bytes; returns a malloc'd NUL-terminated buffer, *len = byte count.
// Invalid ids decode to nothing.
char* tokenizer_decode(const Tokenizer* t, const int* ids, size_t n, size_t* len);

// Pre-tokenizer whitespace: by default \s is Python's (OpenAI's encoder.py, tiktoken), which
// includes U+0085; on = JavaScript's (js-tiktoken, gpt-3-encoder), which has U+FEFF instead.
void tokenizer_set_js_whitespace(Tokenizer* t, int on);

// Drop the cache of encoded pieces (benchmarks use this to time cold encodes).
void tokenizer_clear_cache(Tokenizer* t);

// A split position p >= target (or n) such that encoding text[0..p) and text[p..n) separately
// gives the same ids as encoding the whole text (for encoding large inputs in chunks).
size_t tokenizer_split_point(const Tokenizer* t, const char* text, size_t n, size_t target);

#endif
