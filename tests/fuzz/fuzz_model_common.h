// tests/fuzz/fuzz_model_common.h: a tiny GPT-2 (1 layer, 1 head, 8 wide, block 8, vocab 16)
// built once per fuzzing process, as the target the checkpoint and safetensors readers load into.
#ifndef ATTNLAB_FUZZ_MODEL_COMMON_H
#define ATTNLAB_FUZZ_MODEL_COMMON_H

#include "common/config.h"
#include "model/gpt2.h"
#include "tests/fuzz/fuzz_common.h"

static GPT2 g_model;

static void fuzz_build_model(const char* attention) {
    Config c;
    char err[2048];
    config_defaults(&c);
    c.n_layer = 1;
    c.n_head = 1;
    c.n_embd = 8;
    c.block_size = 8;
    c.vocab_size = 16;
    snprintf(c.attention, sizeof(c.attention), "%s", attention);
    if (gpt2_setup_attention(&g_model, &c, err, sizeof(err))) {
        fprintf(stderr, "fuzz setup: %s\n", err);
        abort();
    }
    GPT2Config gc;
    if (gpt2_config_from(&gc, &c, err, sizeof(err))) {
        fprintf(stderr, "fuzz setup: %s\n", err);
        abort();
    }
    gpt2_build(&g_model, &gc);
    gpt2_init(&g_model, 1);
}

#endif
