// tests/fuzz/fuzz_shard.c: libFuzzer harness for the llm.c token shard reader (shard_probe and
// shard_read). Inputs whose first byte is odd get a valid shard header in front (magic, version,
// token count from the input length) so the fuzzer also reaches the token payload checks.
#include "data/shard.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const char* dir = fuzz_dir("shard");
    const char* path;
    if (size > 0 && (data[0] & 1)) {
        size_t body = size - 1;
        unsigned char* buf = calloc(1, 1024 + body);
        int32_t h[3] = {SHARD_MAGIC, SHARD_VERSION, (int32_t)(body / 2)};
        if (size > 1 && (data[1] & 1)) h[2] += (int32_t)(data[1] >> 1) - 64; // wrong counts too
        memcpy(buf, h, sizeof(h));
        memcpy(buf + 1024, data + 1, body);
        path = fuzz_write(dir, "in.bin", buf, 1024 + body);
        free(buf);
    } else {
        path = fuzz_write(dir, "in.bin", data, size);
    }
    char err[2048];
    size_t ntok;
    shard_probe(path, &ntok, err, sizeof(err));
    Shard s;
    if (shard_read(&s, path, err, sizeof(err)) == 0) {
        volatile unsigned sum = 0;
        for (size_t i = 0; i < s.ntok; i++)
            sum += s.tokens[i];
        shard_free(&s);
    }
    return 0;
}
