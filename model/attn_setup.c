// model/attn_setup.c: turns the config's `attention` spec and `attn.*` keys into the per-layer
// attention of a GPT2 (variant, row map, resolved hyperparameters), with errors that name the
// place a bad key was set and the closest valid key.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/suggest.h"
#include "common/util.h"
#include "model/gpt2.h"
#include "model/residual.h"
#include "model/settings.h"

// The model's settings, one loop over the settings table (model/settings.h), then the rules
// between them and the sizes.
int gpt2_config_from(GPT2Config* g, const Config* c, char* err, size_t errcap) {
    memset(g, 0, sizeof(*g));
    if (settings_from_config(g, c, err, errcap)) return -1;
    g->padded_vocab = (c->vocab_size + 127) / 128 * 128;
    g->z_loss = c->z_loss;
    if (!g->mlp && g->residual != GPT2_RESID_STANDARD) {
        snprintf(err, errcap,
                 "key 'mlp': mlp = 0 (attention-only blocks) cannot be combined with residual = %s "
                 "(its routing assumes an attention and an MLP sublayer per block)",
                 c->residual);
        return -1;
    }
    if (g->pos_encoding == ATTN_POS_XPOS && g->block_size > attn_xpos_max_T()) {
        snprintf(err, errcap,
                 "key 'block_size': %d is beyond the float32 range of pos_encoding = xpos (at "
                 "most %d: longer sequences take xPos scale factors zeta^(+-ceil(T/2)/512) "
                 "outside float's normal range)",
                 g->block_size, attn_xpos_max_T());
        return -1;
    }
    if (g->n_layer > GPT2_MAX_LAYERS) {
        snprintf(err, errcap, "key 'n_layer': %d exceeds the maximum %d", g->n_layer,
                 GPT2_MAX_LAYERS);
        return -1;
    }
    if (g->qk_norm && g->qk_norm_kind == ATTN_QKNORM_LAYERNORM && g->n_embd / g->n_head < 2) {
        snprintf(err, errcap,
                 "key 'qk_norm': qk_norm_kind = layernorm needs a head size of at least 2 (n_embd "
                 "/ n_head = %d / %d = 1 would normalise every q and k to 0)",
                 g->n_embd, g->n_head);
        return -1;
    }
    return 0;
}

static int unknown_variant(const char* name, char* err, size_t errcap) {
    const char* near = attn_closest(name);
    if (near)
        snprintf(err, errcap,
                 "key 'attention': unknown variant '%s' (did you mean '%s'?); "
                 "`./train --list-attention` lists them",
                 name, near);
    else
        snprintf(err, errcap,
                 "key 'attention': unknown variant '%s'; `./train --list-attention` "
                 "lists them",
                 name);
    return -1;
}

// Parse "softmax" or "0-3:softmax,4-11:ssmax" into per-layer variants.
static int parse_spec(const AttnVariant** out, int L, const char* spec, char* err, size_t errcap) {
    for (int l = 0; l < L; l++)
        out[l] = NULL;
    if (!strchr(spec, ':')) {
        const AttnVariant* v = attn_lookup(spec);
        if (!v) return unknown_variant(spec, err, errcap);
        for (int l = 0; l < L; l++)
            out[l] = v;
        return 0;
    }
    char buf[CONFIG_STR];
    util_strlcpy(buf, spec, sizeof(buf));
    char* save = NULL;
    for (char* tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        char* colon = strchr(tok, ':');
        if (!colon) {
            snprintf(err, errcap, "key 'attention': '%s' is not of the form FIRST-LAST:NAME", tok);
            return -1;
        }
        *colon = '\0';
        char* name = colon + 1;
        while (*name == ' ')
            name++;
        char* end = name + strlen(name);
        while (end > name && end[-1] == ' ')
            *--end = '\0';
        int a, b;
        char extra;
        if (sscanf(tok, "%d-%d%c", &a, &b, &extra) == 2) {
        } else if (sscanf(tok, "%d%c", &a, &extra) == 1) {
            b = a;
        } else {
            snprintf(err, errcap, "key 'attention': bad layer range '%s'", tok);
            return -1;
        }
        if (a < 0 || b >= L || a > b) {
            snprintf(err, errcap, "key 'attention': layer range %d-%d outside 0-%d", a, b, L - 1);
            return -1;
        }
        const AttnVariant* v = attn_lookup(name);
        if (!v) return unknown_variant(name, err, errcap);
        for (int l = a; l <= b; l++) {
            if (out[l]) {
                snprintf(err, errcap, "key 'attention': layer %d is given twice", l);
                return -1;
            }
            out[l] = v;
        }
    }
    for (int l = 0; l < L; l++) {
        if (!out[l]) {
            snprintf(err, errcap, "key 'attention': layer %d has no variant", l);
            return -1;
        }
    }
    return 0;
}

int gpt2_setup_attention(GPT2* m, const Config* c, char* err, size_t errcap) {
    const int L = c->n_layer, NH = c->n_head, hs = c->n_embd / c->n_head;
    const AttnVariant* vs[GPT2_MAX_LAYERS];
    if (L > GPT2_MAX_LAYERS) {
        snprintf(err, errcap, "key 'n_layer': at most %d layers", GPT2_MAX_LAYERS);
        return -1;
    }
    if (parse_spec(vs, L, c->attention, err, errcap)) return -1;
    if (attn_pos_from_name(c->pos_encoding) == ATTN_POS_FIRE)
        for (int l = 0; l < L; l++)
            if (!attn_pos_supported(vs[l], ATTN_POS_FIRE)) {
                snprintf(err, errcap,
                         "key 'pos_encoding': %s adds a learned bias to the attention logits, "
                         "which '%s' (layer %d) does not form; use %s, %s, %s or %s",
                         attn_pos_name(ATTN_POS_FIRE), vs[l]->name, l, attn_pos_name(ATTN_POS_ROPE),
                         attn_pos_name(ATTN_POS_ALIBI), attn_pos_name(ATTN_POS_XPOS),
                         attn_pos_name(ATTN_POS_NONE));
                return -1;
            }
    util_strlcpy(m->attention, c->attention, sizeof(m->attention));
    // the inner row map of layer-level variants
    const AttnVariant* inner = attn_lookup("softmax");
    const char* origin = NULL;
    const char* iv = config_attn_get(c, "inner", &origin);
    if (iv) {
        inner = attn_lookup(iv);
        if (!inner || !inner->forward_row) {
            snprintf(err, errcap, "%s: key 'attn.inner': '%s' is not a row-map variant", origin,
                     iv);
            return -1;
        }
    }
    m->maxP = 0;
    for (int l = 0; l < L; l++) {
        LayerAttn* la = &m->la[l];
        memset(la, 0, sizeof(*la));
        la->v = vs[l];
        la->row = vs[l]->layer_forward ? inner : vs[l];
        attn_hparams_default(&la->hp, la->v, c->seq_len, NH, hs, c->n_embd, L);
        la->hp.inner = vs[l]->layer_forward ? inner : NULL;
        attn_hparams_default(&la->row_hp, la->row, c->seq_len, NH, hs, c->n_embd, L);
        if (la->row->params_per_head > m->maxP) m->maxP = la->row->params_per_head;
    }
    // apply attn.* keys to every variant in use that has them
    for (int k = 0; k < c->n_attn; k++) {
        const char* name = c->attn[k].key + 5; // skip "attn."
        if (strcmp(name, "inner") == 0) continue;
        int used = 0;
        for (int l = 0; l < L; l++) {
            LayerAttn* la = &m->la[l];
            const AttnVariant* targets[2] = {la->v, la->row != la->v ? la->row : NULL};
            AttnHParams* hps[2] = {&la->hp, &la->row_hp};
            for (int q = 0; q < 2; q++) {
                if (!targets[q] || attn_hparam_index(targets[q], name) < 0) continue;
                char e2[300];
                if (attn_hparams_set(hps[q], targets[q], name, c->attn[k].value, e2, sizeof(e2))) {
                    snprintf(err, errcap, "%s: %s", c->attn[k].origin, e2);
                    return -1;
                }
                used = 1;
            }
        }
        if (!used) {
            // suggest the closest hyperparameter among the variants in use
            Suggest sg; // common/suggest.h, the one "did you mean"
            suggest_init(&sg, name);
            for (int l = 0; l < L; l++) {
                const AttnVariant* cand[2] = {m->la[l].v, m->la[l].row};
                for (int q = 0; q < 2; q++)
                    for (int i = 0; i < cand[q]->n_hparams; i++)
                        suggest_offer(&sg, cand[q]->hparams[i].name);
            }
            const char* best = suggest_result(&sg);
            if (best)
                snprintf(err, errcap,
                         "%s: unknown key 'attn.%s' for attention '%s' (did you mean "
                         "'attn.%s'?)",
                         c->attn[k].origin, name, c->attention, best);
            else
                snprintf(err, errcap,
                         "%s: unknown key 'attn.%s': attention '%s' has no such "
                         "hyperparameter (see ./train --list-attention)",
                         c->attn[k].origin, name, c->attention);
            return -1;
        }
    }
    // a row-map layer is its own row map: one set of hyperparameters serves both roles
    // composed variants resolve their own row map once, from their final hyperparameters
    // every configuration check of the attention, here at setup (attention/layer_check.c)
    const AttnDims d = {.B = 1, .T = c->block_size, .C = c->n_embd, .NH = NH, .hs = hs};
    for (int l = 0; l < L; l++) {
        LayerAttn* la = &m->la[l];
        if (la->row == la->v) la->row_hp = la->hp;
        attn_compose(&la->own, la->v, &la->hp);
        if (attn_layer_check(la->v, &la->hp, &d, attn_pos_from_name(c->pos_encoding), err, errcap))
            return -1;
    }
    return 0;
}

char* gpt2_config_text(const GPT2* m, const Config* c, const char* precision_info) {
    char* buf = NULL;
    size_t len = 0;
    FILE* f = open_memstream(&buf, &len);
    if (!f) die(1, "cannot allocate the resolved config");
    fprintf(f, "# attnlab resolved config: every key with its value for this run\n");
    config_write(c, f);
    fprintf(f, "# precision in effect: %s\n", precision_info);
    const AttnVariant* seen[2 * GPT2_MAX_LAYERS];
    int nseen = 0;
    fprintf(f, "# attention hyperparameters in effect (defaults included):\n");
    for (int l = 0; l < m->cfg.n_layer; l++) {
        const LayerAttn* la = &m->la[l];
        const AttnVariant* vs[2] = {la->v, la->row};
        const AttnHParams* hs[2] = {&la->hp, &la->row_hp};
        for (int q = 0; q < 2; q++) {
            int dup = 0;
            for (int i = 0; i < nseen; i++)
                dup |= seen[i] == vs[q];
            if (dup || vs[q]->n_hparams == 0) continue;
            seen[nseen++] = vs[q];
            char* hb = NULL;
            size_t hl = 0;
            FILE* hf = open_memstream(&hb, &hl);
            attn_hparams_write(hs[q], vs[q], hf);
            fclose(hf);
            for (char* line = strtok(hb, "\n"); line; line = strtok(NULL, "\n"))
                fprintf(f, "#   %s   (%s)\n", line, vs[q]->name);
            free(hb);
        }
    }
    fclose(f);
    return buf;
}
