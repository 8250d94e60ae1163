// tests/test_attention_accumulate.c: the backward contract of attention_backward, "+= into all
// of these" (attention/layer.h: dx, dqkv, the row-parameter and layer-tensor gradients).
// The model zeroes these buffers before every layer's backward, so a kernel that writes '='
// where it should add gives the same gradients there and in every gradient check; here each
// variant runs its backward once from zeroed buffers (g0) and once from buffers holding known
// values s, and every entry must end at s + g0. B = 2, T = 9, C = 16, NH = 2, at the variant's
// defaults and at every other value of each of its choice hyperparameters.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attention.h"
#include "common/util.h"
#include "tests/attn_harness.h"
#include "tests/testutil.h"

enum { B = 2, T = 9, C = 16, NH = 2, MAXBUF = 2 + ATTN_MAX_TENSORS + 1 };

typedef struct {
    real* p[MAXBUF];
    size_t n[MAXBUF];
    const char* name[MAXBUF];
    int k;
} Grads;

static void grads_of(Grads* g, AttnHarness* h) {
    const size_t BTC = (size_t)B * T * C;
    g->k = 0;
    g->p[g->k] = h->dx, g->n[g->k] = BTC, g->name[g->k++] = "dx";
    g->p[g->k] = h->dqkv, g->n[g->k] = 3 * BTC, g->name[g->k++] = "dqkv";
    if (h->row->params_per_head)
        g->p[g->k] = h->drowp, g->n[g->k] = (size_t)NH * h->row->params_per_head,
        g->name[g->k++] = "drowp";
    for (int t = 0; t < h->ntens; t++)
        g->p[g->k] = h->dtp[t], g->n[g->k] = h->tsize[t], g->name[g->k++] = h->specs[t].name;
}

static float start_value(size_t i) {
    return 0.25f + 0.125f * (float)(i % 7);
}

static void check_accumulates(const AttnVariant* v, const AttnHParams* hp, const char* what) {
    AttnHarness h;
    harness_setup(&h, v, hp, ATTN_POS_LEARNED, B, T, C, NH, 1, 0.0f, 91);
    Grads g;
    grads_of(&g, &h);
    real* g0[MAXBUF];
    attention_forward(&h.L);
    harness_zero_grads(&h);
    attention_backward(&h.L);
    for (int b = 0; b < g.k; b++) {
        g0[b] = allocFloats(g.n[b]);
        memcpy(g0[b], g.p[b], sizeof(real) * g.n[b]);
    }
    attention_forward(&h.L);
    for (int b = 0; b < g.k; b++)
        for (size_t i = 0; i < g.n[b]; i++)
            g.p[b][i] = start_value(i);
    attention_backward(&h.L);
    for (int b = 0; b < g.k; b++) {
        for (size_t i = 0; i < g.n[b]; i++) {
            double want = (double)start_value(i) + (double)g0[b][i];
            double tol = 1e-5 * (1.0 + fabs((double)g0[b][i]));
            ck_assert_msg(fabs((double)g.p[b][i] - want) <= tol,
                          "%s (%s): %s[%zu] = %.7g after a start of %g; %.7g from zero", v->name,
                          what, g.name[b], i, (double)g.p[b][i], (double)start_value(i),
                          (double)g0[b][i]);
        }
        free(g0[b]);
    }
    harness_free(&h);
}

START_TEST(test_backward_accumulates) {
    const AttnVariant* v = attn_get(_i);
    if (!test_variant_selected(v->name)) return;
    AttnHParams def;
    attn_hparams_default(&def, v, T, NH, C / NH, C, 2);
    check_accumulates(v, NULL, "defaults");
    for (int i = 0; i < v->n_hparams; i++) {
        const AttnHParamSpec* s = &v->hparams[i];
        if (!s->choices) continue;
        int nc = 1;
        for (const char* c = s->choices; *c; c++)
            nc += *c == '|';
        for (int c = 0; c < nc; c++) {
            if ((float)c == def.v[i]) continue;
            AttnHParams hp = def;
            hp.v[i] = (float)c;
            hp.inner = v->layer_forward ? attn_lookup("softmax") : NULL;
            check_accumulates(v, &hp, s->name);
        }
    }
}
END_TEST

static Suite* attention_accumulate_suite(void) {
    Suite* s = suite_create("attention_accumulate");
    TCase* tc = tcase_create("accumulate");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_backward_accumulates, 0, attn_count());
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(attention_accumulate_suite)
