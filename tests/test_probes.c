// tests/test_probes.c: the synthetic probe tasks (data/probes.c): shards are valid and
// deterministic for a seed, every answer is right by construction (recomputed here from the
// tokens with separate code), answer positions are located, and accuracy is computed from
// logits as argmax on the answer positions only.
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "data/probes.h"
#include "data/shard.h"
#include "tests/testutil.h"

static unsigned char* slurp(const char* path, size_t* n) {
    FILE* f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char* b = malloc((size_t)len);
    ck_assert_int_eq(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

START_TEST(test_shards_valid_and_deterministic) {
    const char* tasks[] = {"trigger", "recall", "passkey", "copy", "bb", "ibb", "mark"};
    for (int k = 0; k < 5; k++) {
        int task = probes_task_from_name(tasks[k]);
        ck_assert_int_eq(task, k);
        ProbeParams p;
        probes_defaults(&p, task, 64);
        char d1[1024], d2[1024], d3[1024], err[1024];
        snprintf(d1, sizeof(d1), "%s/probes_a", test_tmpdir());
        snprintf(d2, sizeof(d2), "%s/probes_b", test_tmpdir());
        snprintf(d3, sizeof(d3), "%s/probes_c", test_tmpdir());
        ck_assert_int_eq(probes_write(d1, &p, 50, 20, 7, err, sizeof(err)), 0);
        ck_assert_int_eq(probes_write(d2, &p, 50, 20, 7, err, sizeof(err)), 0);
        ck_assert_int_eq(probes_write(d3, &p, 50, 20, 8, err, sizeof(err)), 0);
        const char* split[2] = {"train", "val"};
        size_t ndocs[2] = {50, 20};
        for (int s = 0; s < 2; s++) {
            char f1[2048], f2[2048], f3[2048];
            snprintf(f1, sizeof(f1), "%s/%s_%s_000000.bin", d1, tasks[k], split[s]);
            snprintf(f2, sizeof(f2), "%s/%s_%s_000000.bin", d2, tasks[k], split[s]);
            snprintf(f3, sizeof(f3), "%s/%s_%s_000000.bin", d3, tasks[k], split[s]);
            Shard sh;
            ck_assert_msg(shard_read(&sh, f1, err, sizeof(err)) == 0, "%s", err);
            ck_assert_uint_eq(sh.ntok, ndocs[s] * 64);
            for (size_t i = 0; i < sh.ntok; i++) {
                ck_assert_uint_lt(sh.tokens[i], PROBE_VOCAB);
                // EOT exactly at every document start
                ck_assert_int_eq(sh.tokens[i] == PROBE_EOT, i % 64 == 0);
            }
            ck_assert_int_eq(probes_doc_len(sh.tokens, sh.ntok), 64);
            shard_free(&sh);
            size_t n1, n2, n3;
            unsigned char* b1 = slurp(f1, &n1);
            unsigned char* b2 = slurp(f2, &n2);
            unsigned char* b3 = slurp(f3, &n3);
            ck_assert_uint_eq(n1, 1024 + 2 * 64 * ndocs[s]);
            ck_assert_uint_eq(n1, n2);
            ck_assert_int_eq(memcmp(b1, b2, n1), 0);                      // same seed: same bytes
            ck_assert_int_ne(memcmp(b1 + 1024, b3 + 1024, n1 - 1024), 0); // other seed differs
            free(b1);
            free(b2);
            free(b3);
        }
        // train and val streams differ
        char ft[2048], fv[2048];
        snprintf(ft, sizeof(ft), "%s/%s_train_000000.bin", d1, tasks[k]);
        snprintf(fv, sizeof(fv), "%s/%s_val_000000.bin", d1, tasks[k]);
        size_t nt, nv;
        unsigned char* bt = slurp(ft, &nt);
        unsigned char* bv = slurp(fv, &nv);
        ck_assert_int_ne(memcmp(bt + 1024, bv + 1024, nv - 1024), 0);
        free(bt);
        free(bv);
    }
}
END_TEST

// Independent check of every trigger answer: most frequent preceding symbol (smallest on
// ties) after '!', '.' after a symbol.
START_TEST(test_trigger_answers) {
    ProbeParams p;
    probes_defaults(&p, PROBE_TASK_TRIGGER, 65);
    uint16_t* docs = probes_generate(&p, 11, 200);
    long ntrig = 0, nnoop = 0;
    int8_t bucket[65];
    for (int d = 0; d < 200; d++) {
        const uint16_t* doc = docs + d * 65;
        ck_assert_int_eq(doc[0], PROBE_EOT);
        int hist[256] = {0};
        for (int t = 1; t + 1 < 65; t += 2) {
            int x = doc[t], y = doc[t + 1];
            if (x == '!') {
                int best = -1, bc = -1;
                for (int c = 'a'; c < 'a' + p.alphabet; c++)
                    if (hist[c] > bc) {
                        bc = hist[c];
                        best = c;
                    }
                ck_assert_int_gt(bc, 0); // at least one symbol precedes every trigger
                ck_assert_int_eq(y, best);
                ntrig++;
            } else {
                ck_assert(x >= 'a' && x < 'a' + p.alphabet);
                ck_assert_int_eq(y, '.');
                hist[x]++;
                nnoop++;
            }
        }
        ck_assert_int_eq(probes_answers(bucket, doc, 65, PROBE_TASK_TRIGGER), 32);
        for (int t = 0; t < 65; t++) {
            int want = (t >= 2 && t % 2 == 0) ? (doc[t - 1] == '!' ? 0 : 1) : -1;
            ck_assert_int_eq(bucket[t], want);
        }
    }
    // about 1 in trigger_every inputs is a trigger
    double frac = (double)ntrig / (double)(ntrig + nnoop);
    ck_assert_msg(frac > 0.08 && frac < 0.17, "trigger fraction %.3f", frac);
    free(docs);
}
END_TEST

START_TEST(test_recall_answers) {
    ProbeParams p;
    probes_defaults(&p, PROBE_TASK_RECALL, 64);
    p.pairs = 6;
    uint16_t* docs = probes_generate(&p, 12, 100);
    int8_t bucket[64];
    for (int d = 0; d < 100; d++) {
        const uint16_t* doc = docs + d * 64;
        int val[256];
        for (int i = 0; i < 256; i++)
            val[i] = -1;
        // context: 6 distinct keys with their values, then '|'
        for (int i = 0; i < 6; i++) {
            int k = doc[1 + 2 * i], v = doc[2 + 2 * i];
            ck_assert(k >= 'a' && k <= 'z');
            ck_assert(v >= 'A' && v <= 'Z');
            ck_assert_int_eq(val[k], -1);
            val[k] = v;
        }
        ck_assert_int_eq(doc[13], '|');
        int nq = 0;
        for (int t = 14; t + 1 < 64; t += 2) {
            ck_assert_int_ne(val[doc[t]], -1); // queries ask for context keys
            ck_assert_int_eq(doc[t + 1], val[doc[t]]);
            nq++;
        }
        ck_assert_int_eq(nq, (64 - 14) / 2);
        ck_assert_int_eq(probes_answers(bucket, doc, 64, PROBE_TASK_RECALL), nq);
        for (int t = 0; t < 64; t++)
            ck_assert_int_eq(bucket[t], (t >= 15 && t % 2 == 1) ? 0 : -1);
    }
    free(docs);
}
END_TEST

START_TEST(test_passkey_answers) {
    ProbeParams p;
    probes_defaults(&p, PROBE_TASK_PASSKEY, 50);
    uint16_t* docs = probes_generate(&p, 13, 300);
    int8_t bucket[50];
    int count[3] = {0, 0, 0};
    for (int d = 0; d < 300; d++) {
        const uint16_t* doc = docs + d * 50;
        int needle = -1, nneedle = 0;
        for (int t = 1; t < 48; t++)
            if (doc[t] == '#') {
                needle = t;
                nneedle++;
            } else if (t != needle + 1) {
                ck_assert(doc[t] >= 'a' && doc[t] <= 'z');
            }
        ck_assert_int_eq(nneedle, 1);
        ck_assert_int_eq(doc[48], '?');
        ck_assert_int_eq(doc[49], doc[needle + 1]);
        ck_assert(doc[49] >= 'A' && doc[49] <= 'Z');
        // depth of the needle inside the filler (positions 1..47), in thirds
        double depth = (double)(needle - 1) / (double)(50 - 3 - 1);
        int want = depth < 1.0 / 3 ? 0 : depth < 2.0 / 3 ? 1 : 2;
        ck_assert_int_eq(probes_answers(bucket, doc, 50, PROBE_TASK_PASSKEY), 1);
        ck_assert_int_eq(bucket[49], want);
        ck_assert_int_eq(want, d % 3); // documents cycle through the buckets
        count[want]++;
    }
    ck_assert_int_eq(count[0], 100);
    ck_assert_int_eq(count[2], 100);
    // only the middle bucket
    p.bucket_mask = 2;
    free(docs);
    docs = probes_generate(&p, 14, 30);
    for (int d = 0; d < 30; d++) {
        ck_assert_int_eq(probes_answers(bucket, docs + d * 50, 50, PROBE_TASK_PASSKEY), 1);
        ck_assert_int_eq(bucket[49], 1);
    }
    free(docs);
}
END_TEST

START_TEST(test_copy_answers) {
    ProbeParams p;
    probes_defaults(&p, PROBE_TASK_COPY, 40);
    uint16_t* docs = probes_generate(&p, 15, 200);
    int8_t bucket[40];
    int minL = 100, maxL = 0;
    for (int d = 0; d < 200; d++) {
        const uint16_t* doc = docs + d * 40;
        int L = 0;
        while (doc[1 + L] != '|') {
            ck_assert(doc[1 + L] >= 'a' && doc[1 + L] <= 'z');
            L++;
            ck_assert_int_le(L, 19);
        }
        for (int i = 0; i < L; i++)
            ck_assert_int_eq(doc[2 + L + i], doc[1 + i]);
        for (int t = 2 + 2 * L; t < 40; t++)
            ck_assert_int_eq(doc[t], '.');
        ck_assert_int_eq(probes_answers(bucket, doc, 40, PROBE_TASK_COPY), L);
        for (int t = 0; t < 40; t++)
            ck_assert_int_eq(bucket[t], (t >= L + 2 && t < 2 * L + 2) ? 0 : -1);
        minL = L < minL ? L : minL;
        maxL = L > maxL ? L : maxL;
    }
    ck_assert_int_eq(minL, 1);
    ck_assert_int_eq(maxL, 19);
    free(docs);
}
END_TEST

// Logits built by hand: a one-hot "prediction" of the right answer on every other answer
// position, a wrong one elsewhere; non-answer rows predict garbage and must not count.
START_TEST(test_accuracy_from_logits) {
    const int V = 257, stride = 384, T = 40;
    ProbeParams p;
    probes_defaults(&p, PROBE_TASK_COPY, T);
    uint16_t* docs = probes_generate(&p, 16, 30);
    float* logits = calloc((size_t)T * stride, sizeof(float));
    ProbeScore sc;
    memset(&sc, 0, sizeof(sc));
    long want_c = 0, want_n = 0;
    for (int d = 0; d < 30; d++) {
        const uint16_t* doc = docs + d * T;
        int L = 0;
        while (doc[1 + L] != '|')
            L++;
        for (int t = 0; t < T; t++) {
            float* row = logits + (size_t)t * stride;
            for (int v = 0; v < stride; v++)
                row[v] = 0.0f;
            row[300] = 100.0f; // padded column beyond V: must be ignored
            int target = t + 1 < T ? doc[t + 1] : 0;
            int is_answer = t + 1 >= L + 2 && t + 1 < 2 * L + 2;
            int k = t + 1 - (L + 2);
            if (is_answer && k % 2 == 0) {
                row[target] = 5.0f;
                want_c++;
            } else {
                row[target == 'z' ? 'y' : 'z'] = 5.0f;
            }
            if (is_answer) want_n++;
        }
        probes_score_doc(&sc, PROBE_TASK_COPY, doc, T, logits, (size_t)stride, V);
    }
    ck_assert_int_eq(sc.docs, 30);
    ck_assert_int_eq(sc.malformed, 0);
    ck_assert_int_eq(sc.total[0], want_n);
    ck_assert_int_eq(sc.correct[0], want_c);
    ck_assert_double_eq_tol(probes_accuracy(&sc, -1), (double)want_c / (double)want_n, 1e-12);
    ck_assert_double_eq(probes_accuracy(&sc, 1), -1.0); // no answers in bucket 1
    free(logits);
    free(docs);

    // argmax ties go to the smallest id; only [0, V) is searched
    float row[8] = {1, 3, 3, 0, 0, 0, 0, 9};
    ck_assert_int_eq(probes_argmax(row, 7), 1);
    ck_assert_int_eq(probes_argmax(row, 8), 7);
}
END_TEST

START_TEST(test_bb_answers_and_table) {
    enum { T = 64, N = 400, A = 16 };
    // the table: rows sum to 1 and hold the weights (r+1)^-1.5 / sum, each in its own order
    double P[A * A], Q[A * A], w[A], z = 0;
    for (int r = 0; r < A; r++)
        z += w[r] = 1.0 / ((r + 1.0) * sqrt(r + 1.0));
    probes_bb_table(P, A);
    probes_bb_table(Q, A);
    ck_assert(memcmp(P, Q, sizeof(P)) == 0); // fixed for an alphabet
    int same_argmax = 0, top0 = -1;
    for (int i = 0; i < A; i++) {
        double s = 0, row[A];
        int top = 0;
        for (int j = 0; j < A; j++) {
            s += row[j] = P[i * A + j];
            if (row[j] > row[top]) top = j;
        }
        ck_assert_double_eq_tol(s, 1.0, 1e-12);
        for (int r = 0; r < A; r++) { // the r-th largest entry is w[r] / z
            int best = 0;
            for (int j = 1; j < A; j++)
                if (row[j] > row[best]) best = j;
            ck_assert_double_eq_tol(row[best], w[r] / z, 1e-12);
            row[best] = -1;
        }
        if (i == 0) top0 = top;
        same_argmax += top == top0;
    }
    ck_assert_int_lt(same_argmax, A); // the rows are not one permutation
    // documents: backcopy after every trigger, letters elsewhere, bigram frequencies and the
    // trigger rate as specified
    ProbeParams p;
    probes_defaults(&p, PROBE_TASK_BB, T);
    ck_assert_int_eq(p.alphabet, A);
    uint16_t* docs = probes_generate(&p, 5, N);
    long cnt[A][A], rowtot[A], ntrig = 0, nletter = 0;
    memset(cnt, 0, sizeof(cnt));
    memset(rowtot, 0, sizeof(rowtot));
    int8_t bucket[T];
    for (int d = 0; d < N; d++) {
        const uint16_t* doc = docs + (size_t)d * T;
        ck_assert_int_eq(doc[0], PROBE_EOT);
        ck_assert(doc[1] >= 'a' && doc[1] < 'a' + A);
        int nback = 0, nbig = 0;
        for (int t = 2; t < T; t++) {
            int x = doc[t - 1], y = doc[t];
            if (x >= '0' && x <= '2') {
                ck_assert_int_eq(y, doc[t - 2]);
                ck_assert(y >= 'a' && y < 'a' + A); // a trigger follows a letter only
                nback++;
                continue;
            }
            ck_assert(x >= 'a' && x < 'a' + A);
            nbig++;
            nletter++;
            if (y >= '0' && y <= '2') {
                ntrig++;
            } else {
                ck_assert(y >= 'a' && y < 'a' + A);
                cnt[x - 'a'][y - 'a']++;
                rowtot[x - 'a']++;
            }
        }
        ck_assert_int_eq(probes_answers(bucket, doc, T, PROBE_TASK_BB), T - 2);
        int b0 = 0, b1 = 0;
        ck_assert_int_eq(bucket[0], -1);
        ck_assert_int_eq(bucket[1], -1);
        for (int t = 2; t < T; t++) {
            int trig = doc[t - 1] >= '0' && doc[t - 1] <= '2';
            ck_assert_int_eq(bucket[t], trig ? 0 : 1);
            b0 += bucket[t] == 0;
            b1 += bucket[t] == 1;
        }
        ck_assert_int_eq(b0, nback);
        ck_assert_int_eq(b1, nbig);
    }
    double frac = (double)ntrig / (double)nletter;
    ck_assert_msg(fabs(frac - 1.0 / 8) < 0.02, "trigger rate %.3f", frac);
    for (int i = 0; i < A; i++) {
        ck_assert_int_gt(rowtot[i], 300);
        for (int j = 0; j < A; j++) { // within ~5 standard errors of the table
            double f = (double)cnt[i][j] / (double)rowtot[i], e = P[i * A + j];
            double se = sqrt(e * (1 - e) / (double)rowtot[i]);
            ck_assert_msg(fabs(f - e) < 5 * se + 1e-3, "row %d col %d: %.4f vs %.4f", i, j, f, e);
        }
    }
    // a broken backcopy is not a bb document
    uint16_t bad[T];
    memcpy(bad, docs, sizeof(bad));
    int t = 2;
    while (t < T && !(bad[t - 1] >= '0' && bad[t - 1] <= '2'))
        t++;
    ck_assert_int_lt(t, T);
    bad[t] = bad[t] == 'a' ? 'b' : 'a';
    ck_assert_int_eq(probes_answers(bucket, bad, T, PROBE_TASK_BB), -1);
    free(docs);
}
END_TEST

// The ibb rule from its definition, scanning forward: the answer after a trigger at t-1 is the
// token after the LAST position j < t-2 holding doc[t-2] whose next token is a letter.
static int ibb_ref(const uint16_t* doc, int t) {
    int ans = -1;
    for (int j = 1; j < t - 2; j++)
        if (doc[j] == doc[t - 2] && doc[j + 1] >= 'a' && doc[j + 1] <= 'z') ans = doc[j + 1];
    return ans;
}

START_TEST(test_ibb_answers) {
    enum { T = 64, N = 400, A = 16 };
    ProbeParams p;
    probes_defaults(&p, PROBE_TASK_IBB, T);
    ck_assert_int_eq(p.alphabet, A);
    char err[256];
    ck_assert_int_eq(probes_validate(&p, err, sizeof(err)), 0);
    ck_assert_str_eq(probes_task_name(PROBE_TASK_IBB), "ibb");
    ck_assert_int_eq(probes_task_from_name("ibb"), PROBE_TASK_IBB);
    ck_assert_int_eq(probes_nbuckets(PROBE_TASK_IBB), 2);
    ck_assert_str_eq(probes_bucket_name(PROBE_TASK_IBB, 0), "induction");
    ck_assert_str_eq(probes_bucket_name(PROBE_TASK_IBB, 1), "bigram");
    uint16_t* docs = probes_generate(&p, 5, N);
    long nind = 0, ndiff = 0, ntrig = 0, nletter = 0;
    int8_t bucket[T];
    for (int d = 0; d < N; d++) {
        const uint16_t* doc = docs + (size_t)d * T;
        ck_assert_int_eq(doc[0], PROBE_EOT);
        ck_assert(doc[1] >= 'a' && doc[1] < 'a' + A);
        int nb0 = 0;
        for (int t = 2; t < T; t++) {
            int x = doc[t - 1], y = doc[t];
            if (x >= '0' && x <= '2') {
                int want = ibb_ref(doc, t);
                ck_assert_int_ne(want, -1); // a trigger only where the lookup has an answer
                ck_assert_int_eq(y, want);
                ck_assert_int_eq(probes_ibb_source(doc, t) >= 0, 1);
                ck_assert_int_eq(doc[probes_ibb_source(doc, t)], want);
                nind++;
                ndiff += y != doc[t - 2]; // a plain backcopy would be wrong here
                nb0++;
                continue;
            }
            ck_assert(x >= 'a' && x < 'a' + A);
            nletter++;
            if (y >= '0' && y <= '2')
                ntrig++;
            else
                ck_assert(y >= 'a' && y < 'a' + A);
        }
        ck_assert_int_eq(probes_answers(bucket, doc, T, PROBE_TASK_IBB), T - 2);
        int b0 = 0;
        for (int t = 2; t < T; t++) {
            int trig = doc[t - 1] >= '0' && doc[t - 1] <= '2';
            ck_assert_int_eq(bucket[t], trig ? 0 : 1);
            b0 += bucket[t] == 0;
        }
        ck_assert_int_eq(b0, nb0);
    }
    // triggers come at about 1/8 of the letters (a little less: early letters have no earlier
    // occurrence), and the induction answer is mostly not the letter before the trigger
    double frac = (double)ntrig / (double)nletter;
    ck_assert_msg(frac > 0.08 && frac < 1.0 / 8 + 0.02, "trigger rate %.3f", frac);
    ck_assert_int_gt(nind, 1000);
    ck_assert_msg((double)ndiff / (double)nind > 0.5, "induction != backcopy in %ld of %ld", ndiff,
                  nind);
    // the same documents are not bb documents (their answers are not backcopies), and an
    // induction answer changed to the backcopy is not an ibb document
    int rejected = 0;
    for (int d = 0; d < N; d++)
        rejected += probes_answers(bucket, docs + (size_t)d * T, T, PROBE_TASK_BB) == -1;
    ck_assert_int_gt(rejected, N / 2);
    uint16_t bad[T];
    int done = 0;
    for (int d = 0; d < N && !done; d++) {
        memcpy(bad, docs + (size_t)d * T, sizeof(bad));
        for (int t = 2; t < T && !done; t++)
            if (bad[t - 1] >= '0' && bad[t - 1] <= '2' && bad[t] != bad[t - 2]) {
                bad[t] = bad[t - 2];
                done = 1;
            }
    }
    ck_assert(done);
    ck_assert_int_eq(probes_answers(bucket, bad, T, PROBE_TASK_IBB), -1);
    free(docs);
}
END_TEST

START_TEST(test_mark_answers) {
    enum { T = 64, N = 400, A = 16 };
    ProbeParams p;
    probes_defaults(&p, PROBE_TASK_MARK, T);
    ck_assert_int_eq(p.alphabet, A);
    ck_assert_str_eq(probes_task_name(PROBE_TASK_MARK), "mark");
    ck_assert_str_eq(probes_bucket_name(PROBE_TASK_MARK, 0), "recall");
    ck_assert_str_eq(probes_bucket_name(PROBE_TASK_MARK, 1), "bigram");
    uint16_t* docs = probes_generate(&p, 9, N);
    long nq = 0, nletter_after = 0, ndiff = 0, markpos[T];
    memset(markpos, 0, sizeof(markpos));
    int8_t bucket[T];
    for (int d = 0; d < N; d++) {
        const uint16_t* doc = docs + (size_t)d * T;
        ck_assert_int_eq(doc[0], PROBE_EOT);
        int m = -1, nmark = 0;
        for (int t = 1; t < T; t++)
            if (doc[t] == '^') {
                m = t;
                nmark++;
            }
        ck_assert_int_eq(nmark, 1); // exactly one mark, in [2, T/2], after a letter
        ck_assert(m >= 2 && m <= T / 2);
        ck_assert(doc[m - 1] >= 'a' && doc[m - 1] < 'a' + A);
        markpos[m]++;
        int b0 = 0;
        for (int t = 1; t < T; t++) {
            int y = doc[t];
            if (doc[t - 1] == '?') { // the answer: the letter right before the mark
                ck_assert_int_eq(y, doc[m - 1]);
                ndiff += doc[t - 2] != doc[m - 1]; // not a plain backcopy
                nq++;
                b0++;
            } else if (y == '?') {
                ck_assert_int_gt(t, m + 1); // queries only after the mark, never right after it
                ck_assert(doc[t - 1] >= 'a' && doc[t - 1] < 'a' + A);
            } else if (t != m) {
                ck_assert(y >= 'a' && y < 'a' + A);
                if (t > m + 1) nletter_after++;
            }
        }
        ck_assert_int_eq(probes_answers(bucket, doc, T, PROBE_TASK_MARK), T - 2);
        int c0 = 0;
        for (int t = 2; t < T; t++) {
            ck_assert_int_eq(bucket[t], doc[t - 1] == '?' ? 0 : 1);
            c0 += bucket[t] == 0;
        }
        ck_assert_int_eq(c0, b0);
    }
    // the mark is spread over [2, T/2] (31 places, about 13 documents each)
    int seen = 0;
    for (int t = 2; t <= T / 2; t++)
        seen += markpos[t] > 0;
    ck_assert_int_ge(seen, 28);
    // a query after about 1/8 of the eligible letters; the answer is mostly not the backcopy
    double frac = (double)nq / (double)(nletter_after + nq);
    ck_assert_msg(frac > 0.08 && frac < 0.15, "query rate %.3f", frac);
    ck_assert_msg((double)ndiff / (double)nq > 0.7, "recall != backcopy in %ld of %ld", ndiff, nq);
    // broken documents: a wrong answer, a second mark, a query before the mark
    uint16_t bad[T];
    memcpy(bad, docs, sizeof(bad));
    int t = 2;
    while (t < T && bad[t - 1] != '?')
        t++;
    ck_assert_int_lt(t, T);
    bad[t] = bad[t] == 'a' ? 'b' : 'a';
    ck_assert_int_eq(probes_answers(bucket, bad, T, PROBE_TASK_MARK), -1);
    memcpy(bad, docs, sizeof(bad));
    bad[T - 1] = '^';
    ck_assert_int_eq(probes_answers(bucket, bad, T, PROBE_TASK_MARK), -1);
    memcpy(bad, docs, sizeof(bad));
    int m = 2;
    while (bad[m] != '^')
        m++;
    if (m >= 3) {
        bad[m - 1] = '?';
        ck_assert_int_eq(probes_answers(bucket, bad, T, PROBE_TASK_MARK), -1);
    }
    free(docs);
}
END_TEST

START_TEST(test_malformed_and_validation) {
    int8_t bucket[32];
    uint16_t junk[32];
    for (int t = 0; t < 32; t++)
        junk[t] = (uint16_t)(t * 37 % 300);
    for (int task = 0; task < PROBE_NTASKS; task++)
        ck_assert_int_eq(probes_answers(bucket, junk, 32, task), -1);
    junk[0] = PROBE_EOT;
    for (int t = 1; t < 32; t++)
        junk[t] = '5'; // no separator, trigger, query or symbol
    for (int task = 0; task < PROBE_NTASKS; task++)
        ck_assert_int_eq(probes_answers(bucket, junk, 32, task), -1);
    float logits[32 * 257] = {0};
    ProbeScore sc;
    memset(&sc, 0, sizeof(sc));
    probes_score_doc(&sc, PROBE_TASK_COPY, junk, 32, logits, 257, 257);
    ck_assert_int_eq(sc.malformed, 1);
    ck_assert_int_eq(sc.total[0], 0);
    ck_assert_int_eq(probes_doc_len(junk + 1, 31), -1);

    char err[512];
    ProbeParams p;
    probes_defaults(&p, PROBE_TASK_RECALL, 10);
    ck_assert_int_eq(probes_validate(&p, err, sizeof(err)), -1); // 8 pairs need T >= 20
    ck_assert_ptr_nonnull(strstr(err, "seq-len"));
    p.T = 20;
    ck_assert_int_eq(probes_validate(&p, err, sizeof(err)), 0);
    probes_defaults(&p, PROBE_TASK_COPY, 20);
    p.copy_len = 10;
    ck_assert_int_eq(probes_validate(&p, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "copy-len"));
    ck_assert_int_eq(probes_task_from_name("nope"), -1);
    ck_assert_str_eq(probes_bucket_name(PROBE_TASK_PASSKEY, 2), "end");
}
END_TEST

static Suite* probes_suite(void) {
    Suite* s = suite_create("probes");
    TCase* tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_shards_valid_and_deterministic);
    tcase_add_test(tc, test_trigger_answers);
    tcase_add_test(tc, test_recall_answers);
    tcase_add_test(tc, test_passkey_answers);
    tcase_add_test(tc, test_copy_answers);
    tcase_add_test(tc, test_bb_answers_and_table);
    tcase_add_test(tc, test_ibb_answers);
    tcase_add_test(tc, test_mark_answers);
    tcase_add_test(tc, test_accuracy_from_logits);
    tcase_add_test(tc, test_malformed_and_validation);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(probes_suite)
