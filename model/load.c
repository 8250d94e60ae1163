// model/load.c: models from attnlab model files (see load.h).
#include "model/load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "model/checkpoint.h"

int config_from_text(Config* c, const char* text, const char* what, char* err, size_t errcap) {
    char tmpl[] = "/tmp/attnlab-config-XXXXXX";
    int fd = mkstemp(tmpl);
    if (fd < 0) {
        snprintf(err, errcap, "%s: cannot create a temporary file for its config", what);
        return -1;
    }
    size_t n = strlen(text);
    int ok = write(fd, text, n) == (ssize_t)n;
    close(fd);
    config_defaults(c);
    char e2[1024];
    int rc = ok ? config_load(c, tmpl, e2, sizeof(e2)) : -1;
    unlink(tmpl);
    if (rc)
        snprintf(err, errcap, "%s: its saved config does not parse: %s", what, ok ? e2 : "write");
    return rc ? -1 : 0;
}

int gpt2_load_checkpoint(GPT2* m, Config* cfg, long* step, const char* path, int B, int T,
                         int nthreads, char* err, size_t errcap) {
    GPT2Config info;
    char att[CONFIG_STR];
    char* text = NULL;
    if (ckpt_read_info(path, &info, att, sizeof(att), &text, step, err, errcap)) return -1;
    int rc = config_from_text(cfg, text, path, err, errcap);
    free(text);
    if (rc) return -1;
    memset(m, 0, sizeof(*m));
    if (gpt2_setup_attention(m, cfg, err, errcap)) return -1;
    GPT2Config g;
    if (gpt2_config_from(&g, cfg, err, errcap)) return -1;
    gpt2_build(m, &g);
    long s;
    if (ckpt_load_model(m, path, 1, &s, NULL, 0, err, errcap)) {
        gpt2_free(m);
        return -1;
    }
    if (T > g.block_size) {
        snprintf(err, errcap, "%s: sequence length %d exceeds the model's block_size %d", path, T,
                 g.block_size);
        gpt2_free(m);
        return -1;
    }
    gpt2_alloc_acts(m, B, T, nthreads);
    return 0;
}
