// tests/fuzz/fuzz_checkpoint.c: libFuzzer harness for the checkpoint readers: attnlab model files
// (ckpt_read_info, ckpt_load_model strict and by name), run-state files (run_state_open, then the
// owners' optim_state_get and dataloader_state_get, as the run resumes) and llm.c model files
// (llmc_read_config, llmc_load_params). The first
// input byte picks how the rest is used: as the whole file; as a file body followed by a valid
// crc32 trailer (so the parser past the checksum is reached); or as patches (offset, bytes)
// applied to a valid file of a tiny model, with the trailer recomputed.
#include "common/run_state.h"
#include "common/util.h"
#include "data/dataloader.h"
#include "model/checkpoint.h"
#include "optim/optim.h"
#include "tests/fuzz/fuzz_model_common.h"

static Optimizer g_opt;
static unsigned char *g_model_file, *g_state_file, *g_llmc_file;
static size_t g_model_n, g_state_n, g_llmc_n;

int LLVMFuzzerInitialize(int* argc, char*** argv);
int LLVMFuzzerInitialize(int* argc, char*** argv) {
    (void)argc;
    (void)argv;
    fuzz_build_model("softmax");
    optim_init(&g_opt, optim_lookup("adamw"), g_model.num_params);
    const char* dir = fuzz_dir("checkpoint");
    char p[600], err[2048];
    snprintf(p, sizeof(p), "%s/t_model.bin", dir);
    if (ckpt_save_model(&g_model, p, 7, "n_layer = 1\n", err, sizeof(err))) abort();
    g_model_file = fuzz_slurp(p, &g_model_n);
    snprintf(p, sizeof(p), "%s/t_state.bin", dir);
    RunStateWriter w;
    LoopState loop = {.step = 7, .best_val = -1};
    DataLoaderState pos = {.epoch = 1};
    if (run_state_create(&w, p, 2, &loop, err, sizeof(err))) abort();
    dataloader_state_put(&pos, &w);
    optim_state_put(&g_opt, &w);
    if (run_state_finish(&w, err, sizeof(err))) abort();
    g_state_file = fuzz_slurp(p, &g_state_n);
    snprintf(p, sizeof(p), "%s/t_llmc.bin", dir);
    if (llmc_save(&g_model, p, err, sizeof(err))) abort();
    g_llmc_file = fuzz_slurp(p, &g_llmc_n);
    return 0;
}

static void with_trailer(unsigned char* buf, size_t* n) {
    uint32_t tr[2] = {util_crc32(util_crc32(0, NULL, 0), buf, *n), CKPT_END_MAGIC};
    memcpy(buf + *n, tr, 8);
    *n += 8;
}

static void run_readers(const char* path) {
    char err[2048], note[512], att[256];
    GPT2Config gc;
    char* text = NULL;
    long step;
    if (ckpt_read_info(path, &gc, att, sizeof(att), &text, &step, err, sizeof(err)) == 0)
        free(text);
    ckpt_load_model(&g_model, path, 1, &step, note, sizeof(note), err, sizeof(err));
    ckpt_load_model(&g_model, path, 0, &step, note, sizeof(note), err, sizeof(err));
    static const char* const SECTIONS[] = {DATALOADER_STATE_SECTION, OPTIM_STATE_SECTION};
    RunStateReader r;
    if (run_state_open(&r, path, SECTIONS, 2, err, sizeof(err)) == 0) {
        DataLoaderState pos;
        if (optim_state_get(&g_opt, &r, err, sizeof(err)) == 0)
            dataloader_state_get(&pos, &r, err, sizeof(err));
        run_state_close(&r);
    }
    if (llmc_read_config(path, &gc, err, sizeof(err)) == 0)
        llmc_load_params(&g_model, path, &gc, err, sizeof(err));
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    const char* dir = fuzz_dir("checkpoint");
    int mode = data[0] % 5;
    data++;
    size--;
    unsigned char* buf;
    size_t n;
    if (mode == 0) {
        buf = malloc(size + 1);
        memcpy(buf, data, size);
        n = size;
    } else if (mode == 1) {
        buf = malloc(size + 8);
        memcpy(buf, data, size);
        n = size;
        with_trailer(buf, &n);
    } else {
        // patches: [u16 offset][u8 len][len bytes] ... on a valid template, trailer recomputed
        const unsigned char* tpl = mode == 2   ? g_model_file
                                   : mode == 3 ? g_state_file
                                               : g_llmc_file;
        size_t tn = mode == 2 ? g_model_n : mode == 3 ? g_state_n : g_llmc_n;
        int trailer = mode != 4;
        size_t body = trailer ? tn - 8 : tn;
        buf = malloc(tn + 8);
        memcpy(buf, tpl, body);
        n = body;
        size_t i = 0;
        while (i + 3 <= size) {
            size_t off = ((size_t)data[i] << 8 | data[i + 1]) % (body + 1);
            size_t len = data[i + 2];
            i += 3;
            if (len > size - i) len = size - i;
            if (off + len > body) len = body - off;
            memcpy(buf + off, data + i, len);
            i += len;
        }
        if (size % 7 == 3 && n > 0) n -= (size_t)data[0] % n; // truncations too
        if (trailer) with_trailer(buf, &n);
    }
    const char* path = fuzz_write(dir, "in.bin", buf, n);
    free(buf);
    run_readers(path);
    return 0;
}
