// tests/fuzz/fuzz_safetensors.c: libFuzzer harness for the safetensors reader (st_open,
// st_read_f32), the Hugging Face model loader (hf_load_safetensors into a tiny model) and the
// config.json reader (hf_read_config). The first input byte picks the mode: the whole file; a
// header (the rest of the input, its length prefixed) in front of the data section of a valid
// export of the tiny model; or the input as config.json.
#include "model/hf.h"
#include "tests/fuzz/fuzz_model_common.h"

static unsigned char* g_data; // data section of a valid export
static size_t g_data_n;

int LLVMFuzzerInitialize(int* argc, char*** argv);
int LLVMFuzzerInitialize(int* argc, char*** argv) {
    (void)argc;
    (void)argv;
    fuzz_build_model("softmax");
    const char* dir = fuzz_dir("safetensors");
    char err[2048], p[600];
    if (hf_export(&g_model, dir, NULL, err, sizeof(err))) {
        fprintf(stderr, "fuzz setup: %s\n", err);
        abort();
    }
    snprintf(p, sizeof(p), "%s/model.safetensors", dir);
    size_t n;
    unsigned char* f = fuzz_slurp(p, &n);
    uint64_t hl;
    memcpy(&hl, f, 8);
    g_data_n = n - 8 - hl;
    g_data = malloc(g_data_n);
    memcpy(g_data, f + 8 + hl, g_data_n);
    free(f);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    const char* dir = fuzz_dir("safetensors");
    int mode = data[0] % 3;
    data++;
    size--;
    char err[2048];
    if (mode == 2) {
        fuzz_write(dir, "config.json", data, size);
        GPT2Config gc;
        char att[256];
        hf_read_config(dir, &gc, att, sizeof(att), err, sizeof(err));
        return 0;
    }
    const char* path;
    if (mode == 0) {
        path = fuzz_write(dir, "in.safetensors", data, size);
    } else {
        size_t n = 8 + size + g_data_n;
        unsigned char* buf = malloc(n);
        uint64_t hl = size;
        memcpy(buf, &hl, 8);
        memcpy(buf + 8, data, size);
        memcpy(buf + 8 + size, g_data, g_data_n);
        path = fuzz_write(dir, "in.safetensors", buf, n);
        free(buf);
    }
    SafeTensors st;
    if (st_open(&st, path, err, sizeof(err)) == 0) {
        for (int i = 0; i < st.n; i++) {
            if (st.t[i].numel > (1u << 20)) continue;
            float* out = malloc(sizeof(float) * (size_t)st.t[i].numel + 4);
            st_read_f32(&st, i, out, err, sizeof(err));
            free(out);
        }
        st_close(&st);
        hf_load_safetensors(&g_model, path, err, sizeof(err));
    }
    return 0;
}
