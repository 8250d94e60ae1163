// tests/fuzz/fuzz_tokenizer.c: libFuzzer harness for the GPT-2 tokenizer's vocabulary loader
// (DIR/vocab.bpe). When the real vocab.bpe is available (ATTNLAB_TOKENIZER_DIR or
// data_cache/gpt2), inputs with an odd first byte follow a prefix of it (up to 4 KB, length
// from the next two bytes), so the loader sees valid merge lines followed by damage; a file that
// loads is used to encode and decode a fixed text.
#include "data/tokenizer.h"
#include "tests/fuzz/fuzz_common.h"

static unsigned char* g_real;
static size_t g_real_n;

int LLVMFuzzerInitialize(int* argc, char*** argv);
int LLVMFuzzerInitialize(int* argc, char*** argv) {
    (void)argc;
    (void)argv;
    const char* d = getenv("ATTNLAB_TOKENIZER_DIR");
    char p[600];
    snprintf(p, sizeof(p), "%s/vocab.bpe", d && *d ? d : "data_cache/gpt2");
    g_real = fuzz_slurp(p, &g_real_n);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const char* dir = fuzz_dir("tokenizer");
    if (g_real && size >= 3 && (data[0] & 1)) {
        // a prefix of the real file (up to 4 KB, cut at a line end), then the input
        size_t at = ((size_t)data[1] << 8 | data[2]) % 4096;
        if (at > g_real_n) at = g_real_n;
        while (at > 0 && g_real[at - 1] != '\n')
            at--;
        size_t n = at + (size - 3);
        unsigned char* buf = malloc(n + 1);
        memcpy(buf, g_real, at);
        memcpy(buf + at, data + 3, size - 3);
        fuzz_write(dir, "vocab.bpe", buf, n);
        free(buf);
    } else {
        fuzz_write(dir, "vocab.bpe", data, size);
    }
    char err[2048];
    Tokenizer* t = tokenizer_load("gpt2", dir, err, sizeof(err));
    if (t) {
        static const char text[] = "Call me Ishmael. Some years ago\xe2\x80\x94never mind how long";
        int* ids;
        size_t n = tokenizer_encode(t, text, sizeof(text) - 1, 1, &ids);
        size_t bl;
        char* back = tokenizer_decode(t, ids, n, &bl);
        free(back);
        free(ids);
        tokenizer_free(t);
    }
    return 0;
}
