// tests/fuzz/fuzz_mc.c: libFuzzer harness for the multiple-choice set reader (data/mc.h, mc_load:
// llm.c's evaluation file and HellaSwag JSONL). Inputs whose first byte is odd get a valid header
// in front (magic, version, an example count and a longest-example size taken from the next bytes)
// so the fuzzer reaches the example stream; the others are read as they are (JSONL included),
// with the byte tokenizer and vocab_size 257.
#include "data/mc.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const char* dir = fuzz_dir("mc");
    const char* path;
    if (size > 2 && (data[0] & 1)) {
        size_t body = size - 3;
        unsigned char* buf = calloc(1, 1024 + body);
        int32_t h[4] = {MC_MAGIC, MC_VERSION, 1 + data[1] % 8, 12 + 2 * data[2]};
        memcpy(buf, h, sizeof(h));
        memcpy(buf + 1024, data + 3, body);
        path = fuzz_write(dir, "in.bin", buf, 1024 + body);
        free(buf);
    } else {
        path = fuzz_write(dir, "in.bin", data, size);
    }
    static Tokenizer* tok;
    char err[2048];
    if (!tok) tok = tokenizer_load("byte", NULL, err, sizeof(err));
    McSet s;
    if (mc_load(&s, path, tok, 257, err, sizeof(err)) == 0) {
        mc_check_window(&s, 0, 16, err, sizeof(err));
        volatile long sum = mc_longest_row(&s, 0, 16) + mc_most_completions(&s, 0);
        (void)sum;
        mc_free(&s);
    }
    return 0;
}
