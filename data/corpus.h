// data/corpus.h: text -> one token stream of documents, cut into llm.c shards (what ./prepare
// does). Every document starts with EOT; the stream is the documents in input order. The first
// tokens of the stream form the validation split, the rest the training split, each written as
// PREFIX_SPLIT_NNNNNN.bin shards of at most shard_tokens tokens.
//
// Document boundaries (CorpusOptions.split):
//   "file"       the whole text is one document (empty text: none)
//   "paragraph"  a new document after each run of blank lines; the blank lines stay with the
//                paragraph before them (the first document also takes any leading blank lines),
//                so the documents joined give back the text exactly, as llm.c's tinyshakespeare
//   any other    a separator string, removed from the text; empty pieces make no document
#ifndef ATTNLAB_CORPUS_H
#define ATTNLAB_CORPUS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "data/tokenizer.h"

// The growing token stream.
typedef struct {
    uint16_t* tok;
    size_t n, cap;
    size_t ndocs;
} CorpusTokens;

typedef struct {
    const char* split; // "file", "paragraph" or a separator (escapes already decoded)
    int allow_special; // the literal <|endoftext|> in the text becomes EOT
    // called after each encoded chunk with the bytes it covered (may be NULL)
    void (*progress)(void* ctx, size_t bytes);
    void* progress_ctx;
} CorpusOptions;

// Split `s` (n bytes) into documents and append each, EOT first, to `out`. Long documents are
// encoded in pieces of about chunk_bytes at tokenizer_split_point boundaries, so the tokens are
// the same as encoding the document whole.
void corpus_encode_text(CorpusTokens* out, Tokenizer* t, const char* s, size_t n,
                        const CorpusOptions* o, size_t chunk_bytes);
void corpus_tokens_free(CorpusTokens* c);

// Re-cut the stream into documents of exactly doc_tokens tokens: EOT, then the next
// doc_tokens - 1 tokens of the text with the stream's own EOTs left out; a tail shorter than a
// document is dropped. With seq_len = doc_tokens every training row starts at a document, so
// position 0 always holds the same token (a fixed first token). Returns the tokens dropped.
size_t corpus_fixed_docs(CorpusTokens* c, int eot, size_t doc_tokens);

// Decode \n \t \r \\ (any other \c gives c) in a separator given on the command line; malloc'd.
char* corpus_unescape(const char* s);

// Write tok[0..n) as PREFIX_SPLIT_000000.bin, ... of at most shard_tokens tokens each, then
// remove stale PREFIX_SPLIT_NNNNNN.bin shards of an earlier, larger run. `log` (may be NULL)
// gets one line per file written or removed. Returns the number of shards, or -1 with err.
int corpus_write_split(const char* prefix, const char* split, const uint16_t* tok, size_t n,
                       size_t shard_tokens, FILE* log, char* err, size_t errcap);

#endif
