// tests/test_attention_list.c: the `--list-attention` printer (attn_print_list) against the
// registry. The output is parsed back: the header count, one block per registered variant in
// registry order (no more, no fewer), each block's flags (rows sum to 1, shift invariance,
// layer-level and whether it wraps attn.inner), its source, its per-head parameter names, its
// layer tensors, and one line per hyperparameter whose printed default (a choice word or a
// number with its range) equals the declared one. Every variant names its reference
// implementation ("owner/repo:path" or "paper, ..."), and the form checker itself rejects
// malformed references. `./train --list-attention NAME` prints that variant's block alone (an
// unknown NAME: exit 2, "did you mean"), and README.md states the registry's count.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "attention/attention.h"
#include "common/util.h"
#include "tests/testutil.h"

static char* print_list(size_t* len) {
    char* buf = NULL;
    FILE* f = open_memstream(&buf, len);
    ck_assert(f != NULL);
    attn_print_list(f);
    fclose(f);
    return buf;
}

static int close_to(double a, double b) {
    double d = a - b;
    if (d < 0) d = -d;
    double m = b < 0 ? -b : b;
    return d <= 1e-5 * (m > 1 ? m : 1);
}

// check one variant's block (the lines up to the next empty line)
static void check_block(const AttnVariant* v, char** lines, int nl) {
    char want[512];
    snprintf(want, sizeof(want), "%-12s %s", v->name, v->formula);
    ck_assert_msg(strcmp(lines[0], want) == 0, "%s: first line '%s', expected '%s'", v->name,
                  lines[0], want);
    ck_assert_msg(nl >= 2, "%s: block of %d lines", v->name, nl);
    snprintf(want, sizeof(want), "rows sum to 1: %s; shift-invariant: %s",
             v->rows_sum_to_one ? "yes" : "no", v->shift_invariant ? "yes" : "no");
    ck_assert_msg(strstr(lines[1], want) != NULL, "%s: flags line '%s'", v->name, lines[1]);
    int layer = strstr(lines[1], "layer-level") != NULL;
    int wraps = strstr(lines[1], "wraps attn.inner") != NULL;
    ck_assert_msg(layer == (v->layer_forward != NULL), "%s: layer-level shown %d", v->name, layer);
    ck_assert_msg(wraps == (v->layer_forward && !v->ignores_inner), "%s: wraps shown %d", v->name,
                  wraps);
    int seen_source = 0, seen_ref = 0, seen_dev = 0, seen_pph = 0, seen_layer = 0, nkeys = 0;
    for (int i = 2; i < nl; i++) {
        const char* l = lines[i];
        ck_assert_msg(strncmp(l, "             ", 13) == 0, "%s: line not indented: '%s'", v->name,
                      l);
        l += 13;
        if (strncmp(l, "source: ", 8) == 0) {
            seen_source++;
            ck_assert_msg(v->source && strcmp(l + 8, v->source) == 0, "%s: source '%s'", v->name,
                          l + 8);
        } else if (strncmp(l, "reference: ", 11) == 0) {
            seen_ref++;
            ck_assert_msg(v->reference && strcmp(l + 11, v->reference) == 0, "%s: reference '%s'",
                          v->name, l + 11);
        } else if (strncmp(l, "deviations: ", 12) == 0) {
            seen_dev++;
            ck_assert_msg(v->deviations && strcmp(l + 12, v->deviations) == 0,
                          "%s: deviations '%s'", v->name, l + 12);
        } else if (strncmp(l, "learnable per head:", 19) == 0) {
            seen_pph++;
            char names[512] = "";
            for (int k = 0; k < v->params_per_head; k++) {
                strcat(names, " ");
                strcat(names, v->param_names[k]);
            }
            ck_assert_msg(strcmp(l + 19, names) == 0, "%s: per-head '%s', expected '%s'", v->name,
                          l + 19, names);
        } else if (strncmp(l, "learnable per layer", 19) == 0) {
            seen_layer++;
            AttnDims d = {.B = 1, .T = 1024, .C = 768, .NH = 12, .hs = 64};
            AttnHParams hp;
            attn_hparams_default(&hp, v, 1024, 12, 64, 768, 12);
            AttnTensorSpec ts[ATTN_MAX_TENSORS];
            int nt = v->layer_tensors(ts, &d, &hp);
            for (int k = 0; k < nt; k++) {
                char shape[128];
                int off = snprintf(shape, sizeof(shape), " %s(", ts[k].name);
                size_t numel = 1;
                for (int q = 0; q < ts[k].ndim; q++) {
                    off += snprintf(shape + off, sizeof(shape) - (size_t)off, "%s%d", q ? "," : "",
                                    ts[k].shape[q]);
                    numel *= (size_t)ts[k].shape[q];
                }
                snprintf(shape + off, sizeof(shape) - (size_t)off, ")");
                ck_assert_msg(strstr(l, shape) != NULL, "%s: tensor%s missing in '%s'", v->name,
                              shape, l);
                ck_assert_msg(numel > 0, "%s: tensor %s is empty", v->name, ts[k].name);
            }
        } else if (strncmp(l, "attn.", 5) == 0) {
            ck_assert_msg(nkeys < v->n_hparams, "%s: more key lines than hyperparameters", v->name);
            const AttnHParamSpec* s = &v->hparams[nkeys++];
            char key[64], rest[64];
            ck_assert_msg(sscanf(l + 5, "%63s = %63s", key, rest) == 2, "%s: key line '%s'",
                          v->name, l);
            ck_assert_msg(strcmp(key, s->name) == 0, "%s: key %s, expected %s", v->name, key,
                          s->name);
            if (s->choices) {
                char w[64], paren[300];
                test_nth_choice(w, sizeof(w), s->choices, (int)s->def);
                snprintf(paren, sizeof(paren), "(%s)", s->choices);
                ck_assert_msg(strcmp(rest, w) == 0, "%s: attn.%s default '%s', expected '%s'",
                              v->name, key, rest, w);
                ck_assert_msg(strstr(l, paren) != NULL, "%s: attn.%s choices missing", v->name,
                              key);
            } else {
                double def, lo, hi;
                const char* eq = strchr(l, '=');
                ck_assert_msg(eq && sscanf(eq + 1, " %lf [%lf, %lf]", &def, &lo, &hi) == 3,
                              "%s: numeric key line '%s'", v->name, l);
                ck_assert_msg(close_to(def, s->def) && close_to(lo, s->min) && close_to(hi, s->max),
                              "%s: attn.%s shows %g [%g, %g], declared %g [%g, %g]", v->name, key,
                              def, lo, hi, (double)s->def, (double)s->min, (double)s->max);
            }
            ck_assert_msg(strstr(l, s->help) != NULL, "%s: attn.%s help text missing", v->name,
                          key);
        } else {
            ck_abort_msg("%s: unexpected line '%s'", v->name, l);
        }
    }
    ck_assert_msg(seen_source == (v->source ? 1 : 0), "%s: %d source lines", v->name, seen_source);
    ck_assert_msg(seen_ref == (v->reference ? 1 : 0), "%s: %d reference lines", v->name, seen_ref);
    ck_assert_msg(seen_dev == (v->deviations ? 1 : 0), "%s: %d deviation lines", v->name, seen_dev);
    ck_assert_msg(seen_pph == (v->params_per_head > 0), "%s: %d per-head lines", v->name, seen_pph);
    ck_assert_msg(seen_layer <= (v->layer_tensors != NULL), "%s: %d per-layer lines", v->name,
                  seen_layer);
    ck_assert_msg(nkeys == v->n_hparams, "%s: %d key lines for %d hyperparameters", v->name, nkeys,
                  v->n_hparams);
}

START_TEST(test_list_matches_registry) {
    size_t len = 0;
    char* out = print_list(&len);
    ck_assert_msg(len > 0 && out[len - 1] == '\n', "output does not end with a newline");
    int n = attn_count();
    char head[128];
    snprintf(head, sizeof(head), "attention variants (%d); ", n);
    ck_assert_msg(strncmp(out, head, strlen(head)) == 0, "header: %.80s", out);
    // split into lines (in place)
    int cap = 4096, nl = 0;
    char** lines = malloc(sizeof(char*) * (size_t)cap);
    for (char* p = out; *p;) {
        char* e = strchr(p, '\n');
        ck_assert(e != NULL && nl < cap);
        *e = '\0';
        lines[nl++] = p;
        p = e + 1;
    }
    ck_assert_msg(nl >= 2 && lines[1][0] == '\0', "no empty line after the header");
    int i = 2, blocks = 0;
    while (i < nl) {
        int j = i;
        while (j < nl && lines[j][0] != '\0')
            j++;
        ck_assert_msg(j < nl, "the last block is not followed by an empty line");
        ck_assert_msg(blocks < n, "more blocks than the %d registered variants: '%s'", n, lines[i]);
        check_block(attn_get(blocks), lines + i, j - i);
        blocks++;
        i = j + 1;
    }
    ck_assert_msg(blocks == n, "%d blocks for %d variants", blocks, n);
    free(lines);
    free(out);
}
END_TEST

// 1 when ref has one of the two documented forms of AttnVariant.reference: "owner/repo:path"
// (its first word: non-empty owner, repository and path; a note may follow after a space) or
// "paper, ..." with text after the prefix.
static int reference_form_ok(const char* ref) {
    if (!ref || !*ref) return 0;
    if (strncmp(ref, "paper, ", 7) == 0) return ref[7] != '\0' && ref[7] != ' ';
    size_t w = strcspn(ref, " "); // the first word
    const char* slash = memchr(ref, '/', w);
    const char* colon = memchr(ref, ':', w);
    return slash && colon && slash > ref && colon > slash + 1 && (size_t)(colon - ref) + 1 < w &&
           colon[1] != '/';
}

START_TEST(test_reference_form_checker) {
    ck_assert(reference_form_ok("zaydzuhri/softpick-attention:naive_softpick_attn.py"));
    ck_assert(reference_form_ok("paper, arXiv 2410.02703, Sec. 3"));
    ck_assert(!reference_form_ok(NULL));
    ck_assert(!reference_form_ok(""));
    ck_assert(!reference_form_ok("paper, "));
    ck_assert(!reference_form_ok("paper"));
    ck_assert(!reference_form_ok("owner/repo"));                        // no path
    ck_assert(!reference_form_ok("owner/repo:"));                       // empty path
    ck_assert(!reference_form_ok("repo:path.py"));                      // no owner
    ck_assert(!reference_form_ok("/repo:path.py"));                     // empty owner
    ck_assert(!reference_form_ok("owner/:path.py"));                    // empty repository
    ck_assert(!reference_form_ok("Vaswani et al. 2017, a/b:c"));        // prose, not a path
    ck_assert(reference_form_ok("owner/repo:path.py (the Foo class)")); // a note after the path
    ck_assert(!reference_form_ok("owner/repo: path.py"));               // the path after a space
}
END_TEST

// Every registered variant names the implementation its default follows (attention/rowmap.h),
// and a deviations text, when present, says something. The failing variants are listed together.
START_TEST(test_every_variant_names_its_reference) {
    char bad[4096] = "";
    int nbad = 0;
    for (int i = 0; i < attn_count(); i++) {
        const AttnVariant* v = attn_get(i);
        int ok = reference_form_ok(v->reference);
        if (v->deviations && (!*v->deviations || strcmp(v->deviations, "none") == 0)) ok = 0;
        if (!ok) {
            size_t off = strlen(bad);
            snprintf(bad + off, sizeof(bad) - off, " %s", v->name);
            nbad++;
        }
    }
    ck_assert_msg(nbad == 0,
                  "%d variants without a reference of the form owner/repo:path or 'paper, ...' "
                  "(or with an empty deviations text):%s",
                  nbad, bad);
}
END_TEST

// Exit code and output (stdout and stderr) of BUILD/train with `args`.
static int train_out(const char* args, char* out, size_t cap) {
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "%s/train %s 2>&1", test_build_dir(), args);
    FILE* p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

// ./train --list-attention NAME prints that variant's entry and nothing else; an unknown NAME
// exits 2 with the closest name.
START_TEST(test_list_one_variant) {
    static char out[1 << 16];
    ck_assert_int_eq(train_out("--list-attention softpick", out, sizeof(out)), 0);
    char* want = NULL;
    size_t wl = 0;
    FILE* f = open_memstream(&want, &wl);
    attn_print_variant(f, attn_lookup("softpick"));
    fclose(f);
    ck_assert_str_eq(out, want);
    ck_assert_msg(strncmp(out, "softpick ", 9) == 0 && !strstr(out, "attention variants ("), "%s",
                  out);
    free(want);
    ck_assert_int_eq(train_out("--list-attention softpik", out, sizeof(out)), 2);
    ck_assert_msg(strstr(out, "unknown variant 'softpik'") &&
                      strstr(out, "did you mean 'softpick'?"),
                  "%s", out);
    ck_assert_int_eq(train_out("--list-attention", out, sizeof(out)), 0); // all of them
    ck_assert_msg(strstr(out, "\nsoftpick ") && strstr(out, "\nsoftmax "), "%.200s", out);
}
END_TEST

// README.md's first paragraph gives the number of variants the registry has ("any of N").
START_TEST(test_readme_count) {
    char p[4200], e[4400];
    snprintf(p, sizeof(p), "%s/README.md", test_repo_root());
    size_t len;
    char* text = util_read_file(p, &len, e, sizeof(e));
    ck_assert_msg(text != NULL, "%s", e);
    char* par = strstr(text, "\n\n"); // after the title
    ck_assert_ptr_nonnull(par);
    char* par_end = strstr(par + 2, "\n\n");
    ck_assert_ptr_nonnull(par_end);
    *par_end = '\0';
    const char* any = strstr(par, "any of ");
    ck_assert_msg(any != NULL, "README.md's first paragraph has no 'any of N'");
    ck_assert_int_eq(atoi(any + 7), attn_count());
    free(text);
}
END_TEST

static Suite* attention_list_suite(void) {
    Suite* s = suite_create("attention_list");
    TCase* tc = tcase_create("list");
    tcase_add_test(tc, test_list_matches_registry);
    tcase_add_test(tc, test_reference_form_checker);
    tcase_add_test(tc, test_every_variant_names_its_reference);
    tcase_add_test(tc, test_list_one_variant);
    tcase_add_test(tc, test_readme_count);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(attention_list_suite)
