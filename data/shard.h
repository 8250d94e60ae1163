// data/shard.h: llm.c token shards. A shard is an int32[256] header (magic 20240520, version 1,
// token count) followed by that many uint16 tokens; file size must equal 1024 + 2*ntok.
// Readers reject anything else with a message naming the file and what is wrong.
#ifndef ATTNLAB_SHARD_H
#define ATTNLAB_SHARD_H

#include <stddef.h>
#include <stdint.h>

#define SHARD_MAGIC       20240520
#define SHARD_VERSION     1
#define SHARD_HEADER_INTS 256

typedef struct {
    char path[1024];
    size_t ntok;
    uint16_t* tokens; // ntok tokens (owned)
} Shard;

// Read and validate a whole shard. 0, or -1 with err = "PATH: what is wrong".
int shard_read(Shard* s, const char* path, char* err, size_t errcap);
// Validate only the header and file size; *ntok gets the token count.
int shard_probe(const char* path, size_t* ntok, char* err, size_t errcap);
void shard_free(Shard* s);

// Write a shard atomically (temp file + fsync + rename). 0, or -1 with err.
int shard_write(const char* path, const uint16_t* tokens, size_t ntok, char* err, size_t errcap);

#endif
