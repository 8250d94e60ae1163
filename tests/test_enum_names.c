// tests/test_enum_names.c: each enum's names have one table beside the enum (position encodings:
// attention/attention.c attn_pos_name; residual modes: model/residual.c resid_name; matmul
// precision: common/matmul.c mm_precision_name; qk-norm kinds: attention/qknorm.c attn_qknorm_name;
// weight-decay modes: optim/optim.c optim_wd_mode_name), and the config keys that take them must
// agree:
//   - every enum value has a non-empty name, the names are distinct, x_from_name inverts x_name,
//     out-of-range values have no name and unknown words no value;
//   - the "a|b|c" choices of the config key (common/config_table.c) are exactly the table's names
//     (precision: plus MM_PRECISION_AUTO), and its default is one of them. common/ cannot include
//     attention/ or model/, so the key table holds the words as text and this suite is what ties
//     them to the tables: an enum value added without a name, or a name without a config choice
//     (or the reverse), fails here;
//   - config_validate's one use of position names (odd head sizes under the rotating encodings)
//     covers exactly the encodings attn_pos_rotates names;
//   - every variant's choice hyperparameters ("fixed|stochastic", ...): distinct non-empty words,
//     each setting the value of its index (the variants' enums are those indices).
#include <stdio.h>
#include <string.h>

#include "attention/attention.h"
#include "common/config.h"
#include "common/matmul.h"
#include "model/residual.h"
#include "optim/optim.h"
#include "tests/testutil.h"

typedef const char* (*NameFn)(int);
typedef int (*FromFn)(const char*);

static const char* prec_name(int p) {
    return mm_precision_name((MMPrecision)p);
}

// The table of one enum: names present, distinct, inverted by from_name.
static void check_table(const char* what, NameFn name, FromFn from, int count) {
    ck_assert_msg(name(-1) == NULL && name(count) == NULL, "%s: a name outside [0, %d)", what,
                  count);
    ck_assert_int_eq(from("no-such-name"), -1);
    ck_assert_int_eq(from(""), -1);
    for (int i = 0; i < count; i++) {
        const char* n = name(i);
        ck_assert_msg(n && n[0], "%s: value %d has no name", what, i);
        ck_assert_msg(strchr(n, '|') == NULL && strchr(n, ' ') == NULL, "%s: name '%s'", what, n);
        ck_assert_msg(from(n) == i, "%s: from_name('%s') = %d, not %d", what, n, from(n), i);
        for (int j = 0; j < i; j++)
            ck_assert_msg(strcmp(n, name(j)) != 0, "%s: values %d and %d are both '%s'", what, j, i,
                          n);
    }
}

// Is `w` (length len) one of the '|'-separated words of `choices`?
static int in_choices(const char* choices, const char* w, size_t len) {
    const char* p = choices;
    for (;;) {
        const char* e = strchr(p, '|');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == len && strncmp(p, w, len) == 0) return 1;
        if (!e) return 0;
        p = e + 1;
    }
}

// The config key's choices are the table's names plus `extra` (NULL: none), nothing else.
static void check_key(const char* key, NameFn name, FromFn from, int count, const char* extra) {
    const ConfigField* f = config_field(key);
    ck_assert_msg(f && f->choices, "config key '%s' has no choices", key);
    for (int i = 0; i < count; i++)
        ck_assert_msg(in_choices(f->choices, name(i), strlen(name(i))),
                      "config key '%s': choices \"%s\" lack '%s' (enum value %d)", key, f->choices,
                      name(i), i);
    if (extra)
        ck_assert_msg(in_choices(f->choices, extra, strlen(extra)), "'%s' lacks '%s'", key, extra);
    int words = 0;
    for (const char* p = f->choices;;) {
        const char* e = strchr(p, '|');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char w[64];
        ck_assert(n > 0 && n < sizeof(w));
        memcpy(w, p, n);
        w[n] = '\0';
        ck_assert_msg(from(w) >= 0 || (extra && strcmp(w, extra) == 0),
                      "config key '%s': choice '%s' is no name of its enum", key, w);
        words++;
        if (!e) break;
        p = e + 1;
    }
    ck_assert_int_eq(words, count + (extra != NULL));
    ck_assert_msg(from(f->def) >= 0 || (extra && strcmp(f->def, extra) == 0),
                  "config key '%s': default '%s' is not a choice", key, f->def);
}

START_TEST(test_position_encodings) {
    check_table("pos_encoding", attn_pos_name, attn_pos_from_name, ATTN_POS_COUNT);
    check_key("pos_encoding", attn_pos_name, attn_pos_from_name, ATTN_POS_COUNT, NULL);
    ck_assert_int_eq(attn_pos_from_name("fire"), ATTN_POS_FIRE); // the name exporters lost
    // config_validate (common/config_check.c) refuses an odd head size for the rotating
    // encodings by their names: exactly those attn_pos_rotates says rotate
    for (int p = 0; p < ATTN_POS_COUNT; p++) {
        Config c;
        char err[512];
        config_defaults(&c);
        c.n_embd = 36;
        c.n_head = 4; // head size 9
        snprintf(c.pos_encoding, sizeof(c.pos_encoding), "%s", attn_pos_name(p));
        const int refused = config_validate(&c, err, sizeof(err)) != 0;
        ck_assert_msg(refused == attn_pos_rotates(p), "pos_encoding = %s, head size 9: %s",
                      attn_pos_name(p), refused ? err : "accepted");
    }
}
END_TEST

START_TEST(test_residual_modes) {
    check_table("residual", resid_name, resid_from_name, GPT2_RESID_COUNT);
    check_key("residual", resid_name, resid_from_name, GPT2_RESID_COUNT, NULL);
}
END_TEST

START_TEST(test_precisions) {
    check_table("precision", prec_name, mm_precision_from_name, MM_PRECISION_COUNT);
    check_key("precision", prec_name, mm_precision_from_name, MM_PRECISION_COUNT,
              MM_PRECISION_AUTO);
}
END_TEST

START_TEST(test_qknorm_kinds_and_decay_modes) {
    check_table("qk_norm_kind", attn_qknorm_name, attn_qknorm_from_name, ATTN_QKNORM_COUNT);
    check_key("qk_norm_kind", attn_qknorm_name, attn_qknorm_from_name, ATTN_QKNORM_COUNT, NULL);
    ck_assert_str_eq(config_field("qk_norm_kind")->def, "layernorm"); // the paper's
    check_table("weight_decay_mode", optim_wd_mode_name, optim_wd_mode_from_name, OPTIM_WD_COUNT);
    check_key("weight_decay_mode", optim_wd_mode_name, optim_wd_mode_from_name, OPTIM_WD_COUNT,
              NULL);
    ck_assert_int_eq(optim_wd_mode_from_name(config_field("weight_decay_mode")->def),
                     OPTIM_WD_COUPLED);
}
END_TEST

START_TEST(test_variant_choices) {
    int nchoice = 0;
    for (int i = 0; i < attn_count(); i++) {
        const AttnVariant* v = attn_get(i);
        for (int k = 0; k < v->n_hparams; k++) {
            const AttnHParamSpec* s = &v->hparams[k];
            if (!s->choices) continue;
            char words[16][64];
            int n = 0;
            for (const char* p = s->choices;;) {
                const char* e = strchr(p, '|');
                size_t len = e ? (size_t)(e - p) : strlen(p);
                ck_assert_msg(len > 0 && len < 64 && n < 16, "%s attn.%s: choices \"%s\"", v->name,
                              s->name, s->choices);
                memcpy(words[n], p, len);
                words[n][len] = '\0';
                for (int j = 0; j < n; j++)
                    ck_assert_msg(strcmp(words[j], words[n]) != 0, "%s attn.%s: '%s' twice",
                                  v->name, s->name, words[n]);
                n++;
                if (!e) break;
                p = e + 1;
            }
            ck_assert_msg(s->def >= 0 && s->def < n, "%s attn.%s: default index %g of %d", v->name,
                          s->name, s->def, n);
            for (int j = 0; j < n; j++) {
                AttnHParams hp;
                char err[256];
                attn_hparams_default(&hp, v, 64, 4, 16, 64, 2);
                ck_assert_msg(attn_hparams_set(&hp, v, s->name, words[j], err, sizeof(err)) == 0,
                              "%s", err);
                ck_assert_msg(hp.v[k] == (float)j, "%s attn.%s = %s gives %g, not %d", v->name,
                              s->name, words[j], hp.v[k], j);
                nchoice++;
            }
        }
    }
    ck_assert_int_gt(nchoice, 10);
}
END_TEST

static Suite* enum_names_suite(void) {
    Suite* s = suite_create("enum_names");
    TCase* tc = tcase_create("tables");
    tcase_add_test(tc, test_position_encodings);
    tcase_add_test(tc, test_residual_modes);
    tcase_add_test(tc, test_precisions);
    tcase_add_test(tc, test_qknorm_kinds_and_decay_modes);
    tcase_add_test(tc, test_variant_choices);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(enum_names_suite)
