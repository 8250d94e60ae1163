// data/probes.c: generators, answer locators and accuracy for the synthetic probe tasks
// (trigger-conditional, multi-query associative recall, passkey retrieval, copy,
// Bigram-Backcopy, induction Bigram-Backcopy, mark recall). The layouts
// are described in data/probes.h.
#include "data/probes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "data/shard.h"

// The tasks over bb's letters and bigram table (alphabet 16, two buckets).
static int bb_family(int task) {
    return task == PROBE_TASK_BB || task == PROBE_TASK_IBB || task == PROBE_TASK_MARK;
}

static const char* const TASK_NAMES[PROBE_NTASKS] = {"trigger", "recall", "passkey", "copy",
                                                     "bb",      "ibb",    "mark"};

int probes_task_from_name(const char* name) {
    for (int i = 0; i < PROBE_NTASKS; i++)
        if (strcmp(name, TASK_NAMES[i]) == 0) return i;
    return -1;
}

const char* probes_task_name(int task) {
    return (task >= 0 && task < PROBE_NTASKS) ? TASK_NAMES[task] : "?";
}

int probes_nbuckets(int task) {
    if (task == PROBE_TASK_TRIGGER) return 2;
    if (task == PROBE_TASK_PASSKEY) return 3;
    if (bb_family(task)) return 2;
    return 1;
}

const char* probes_bucket_name(int task, int bucket) {
    static const char* const trig[] = {"trigger", "noop"};
    static const char* const pk[] = {"start", "middle", "end"};
    static const char* const bb[] = {"backcopy", "bigram"};
    static const char* const ibb[] = {"induction", "bigram"};
    if (task == PROBE_TASK_BB && bucket >= 0 && bucket < 2) return bb[bucket];
    static const char* const mark[] = {"recall", "bigram"};
    if (task == PROBE_TASK_IBB && bucket >= 0 && bucket < 2) return ibb[bucket];
    if (task == PROBE_TASK_MARK && bucket >= 0 && bucket < 2) return mark[bucket];
    if (task == PROBE_TASK_TRIGGER && bucket >= 0 && bucket < 2) return trig[bucket];
    if (task == PROBE_TASK_PASSKEY && bucket >= 0 && bucket < 3) return pk[bucket];
    return "all";
}

void probes_defaults(ProbeParams* p, int task, int T) {
    memset(p, 0, sizeof(*p));
    p->task = task;
    p->T = T;
    p->alphabet = task == PROBE_TASK_TRIGGER ? 4 : bb_family(task) ? 16 : 26;
    p->pairs = 8;
    p->trigger_every = 8;
    p->copy_len = 0;
    p->bucket_mask = 7;
}

int probes_validate(const ProbeParams* p, char* err, size_t errcap) {
    static const int min_T[PROBE_NTASKS] = {5, 0, 8, 4, 4, 4, 6};
    if (p->task < 0 || p->task >= PROBE_NTASKS) {
        snprintf(err, errcap, "unknown task %d", p->task);
        return -1;
    }
    if (p->alphabet < 2 || p->alphabet > 26) {
        snprintf(err, errcap, "alphabet = %d is out of range [2, 26]", p->alphabet);
        return -1;
    }
    int need = p->task == PROBE_TASK_RECALL ? 2 * p->pairs + 4 : min_T[p->task];
    if (p->T < need || p->T > 65536) {
        snprintf(err, errcap, "seq-len = %d is out of range [%d, 65536] for task %s", p->T, need,
                 probes_task_name(p->task));
        return -1;
    }
    if (p->pairs < 1 || p->pairs > 26) {
        snprintf(err, errcap, "pairs = %d is out of range [1, 26]", p->pairs);
        return -1;
    }
    if (p->trigger_every < 2 || p->trigger_every > 1000000) {
        snprintf(err, errcap, "trigger-every = %d is out of range [2, 1000000]", p->trigger_every);
        return -1;
    }
    if (p->copy_len < 0 || p->copy_len > (p->T - 2) / 2) {
        snprintf(err, errcap, "copy-len = %d is out of range [0, %d] for seq-len %d", p->copy_len,
                 (p->T - 2) / 2, p->T);
        return -1;
    }
    if (p->bucket_mask < 1 || p->bucket_mask > 7) {
        snprintf(err, errcap, "bucket mask %d selects no bucket (1..7)", p->bucket_mask);
        return -1;
    }
    return 0;
}

// Passkey: the filler spans positions 1 .. T-3 (F = T-3 tokens); the two needle tokens start at
// filler offset o in [0, F-2]; the bucket is the third of [0, F-1) holding o.
static int passkey_bucket(int o, int T) {
    int F = T - 3;
    int b = (int)((3L * o) / (F - 1));
    return b > 2 ? 2 : b;
}

static void make_trigger(uint16_t* doc, const ProbeParams* p, Rng* r) {
    int A = p->alphabet;
    int dominant = (int)rng_below(r, (uint64_t)A);
    long count[26] = {0};
    int npairs = (p->T - 1) / 2;
    for (int i = 0; i < npairs; i++) {
        int x;
        if (i > 0 && rng_below(r, (uint64_t)p->trigger_every) == 0) {
            x = -1;
        } else if (rng_uniform(r) < 0.4f) {
            x = dominant;
        } else {
            x = (int)rng_below(r, (uint64_t)A);
        }
        int y = PROBE_NOOP;
        if (x < 0) {
            int best = 0;
            for (int s = 1; s < A; s++)
                if (count[s] > count[best]) best = s;
            y = 'a' + best;
        } else {
            count[x]++;
        }
        doc[1 + 2 * i] = (uint16_t)(x < 0 ? PROBE_TRIGGER : 'a' + x);
        doc[2 + 2 * i] = (uint16_t)y;
    }
    if ((p->T - 1) % 2) doc[p->T - 1] = PROBE_NOOP;
}

static void make_recall(uint16_t* doc, const ProbeParams* p, Rng* r) {
    int keys[26], vals[26];
    for (int i = 0; i < 26; i++)
        keys[i] = i;
    for (int i = 0; i < p->pairs; i++) { // partial Fisher-Yates: pairs distinct keys
        int j = i + (int)rng_below(r, (uint64_t)(26 - i));
        int t = keys[i];
        keys[i] = keys[j];
        keys[j] = t;
        vals[i] = (int)rng_below(r, (uint64_t)p->alphabet);
    }
    int pos = 1;
    for (int i = 0; i < p->pairs; i++) {
        doc[pos++] = (uint16_t)('a' + keys[i]);
        doc[pos++] = (uint16_t)('A' + vals[i]);
    }
    doc[pos++] = PROBE_SEP;
    while (pos + 1 < p->T) {
        int q = (int)rng_below(r, (uint64_t)p->pairs);
        doc[pos++] = (uint16_t)('a' + keys[q]);
        doc[pos++] = (uint16_t)('A' + vals[q]);
    }
    if (pos < p->T) doc[pos] = PROBE_NOOP;
}

static void make_passkey(uint16_t* doc, const ProbeParams* p, Rng* r, uint64_t index) {
    int T = p->T, F = T - 3;
    int enabled[3], ne = 0;
    for (int b = 0; b < 3; b++)
        if (p->bucket_mask & (1 << b)) enabled[ne++] = b;
    int bucket = enabled[index % (uint64_t)ne];
    int o;
    do {
        o = (int)rng_below(r, (uint64_t)(F - 1));
    } while (passkey_bucket(o, T) != bucket);
    int key = (int)rng_below(r, (uint64_t)p->alphabet);
    for (int t = 1; t <= F; t++)
        doc[t] = (uint16_t)('a' + rng_below(r, (uint64_t)p->alphabet));
    doc[1 + o] = PROBE_NEEDLE;
    doc[2 + o] = (uint16_t)('A' + key);
    doc[T - 2] = PROBE_QUERY;
    doc[T - 1] = (uint16_t)('A' + key);
}

static void make_copy(uint16_t* doc, const ProbeParams* p, Rng* r) {
    int maxL = p->copy_len > 0 ? p->copy_len : (p->T - 2) / 2;
    int L = 1 + (int)rng_below(r, (uint64_t)maxL);
    for (int i = 0; i < L; i++)
        doc[1 + i] = (uint16_t)('a' + rng_below(r, (uint64_t)p->alphabet));
    doc[1 + L] = PROBE_SEP;
    for (int i = 0; i < L; i++)
        doc[2 + L + i] = doc[1 + i];
    for (int t = 2 + 2 * L; t < p->T; t++)
        doc[t] = PROBE_NOOP;
}

void probes_bb_table(double* P, int A) {
    Rng r;
    rng_seed(&r, 0x6262ULL + (uint64_t)A); // fixed: the table belongs to the task
    for (int i = 0; i < A; i++) {
        int perm[26];
        for (int j = 0; j < A; j++)
            perm[j] = j;
        for (int j = A - 1; j > 0; j--) {
            int k = (int)rng_below(&r, (uint64_t)(j + 1));
            int t = perm[j];
            perm[j] = perm[k];
            perm[k] = t;
        }
        double z = 0.0;
        for (int rank = 0; rank < A; rank++)
            z += pow(rank + 1.0, -1.5);
        for (int rank = 0; rank < A; rank++)
            P[i * A + perm[rank]] = pow(rank + 1.0, -1.5) / z;
    }
}

static int bb_is_trigger(int tok) {
    return tok >= '0' && tok < '0' + PROBE_BB_NTRIG;
}

// A letter drawn from row `prev` of the bigram table P (A letters).
static int bigram_next(const double* P, int A, int prev, Rng* r) {
    const double* row = P + (prev - 'a') * A;
    double u = rng_uniform(r), c = 0.0;
    for (int j = 0; j < A; j++) {
        c += row[j];
        if (u < c) return 'a' + j;
    }
    return 'a' + A - 1;
}

int probes_ibb_source(const uint16_t* doc, int t) {
    if (t < 3) return -1;
    int x = doc[t - 2];
    for (int j = t - 3; j >= 1; j--)
        if (doc[j] == x && doc[j + 1] >= 'a' && doc[j + 1] <= 'z') return j + 1;
    return -1;
}

// bb (induction = 0) and ibb (induction = 1).
static void make_bb(uint16_t* doc, const ProbeParams* p, Rng* r, int induction) {
    const int A = p->alphabet;
    double P[26 * 26];
    probes_bb_table(P, A);
    doc[1] = (uint16_t)('a' + rng_below(r, (uint64_t)A));
    for (int t = 2; t < p->T; t++) {
        int prev = doc[t - 1];
        if (bb_is_trigger(prev)) { // the token before the trigger (always a letter), or the
                                   // letter after its previous occurrence
            doc[t] = induction ? doc[probes_ibb_source(doc, t)] : doc[t - 2];
            continue;
        }
        // ibb: a trigger at t needs an answer source for t + 1, an earlier occurrence of prev
        // with a letter after it (probes_ibb_source(doc, t + 1) looks from t - 2 down)
        if (rng_below(r, (uint64_t)p->trigger_every) == 0 &&
            (!induction || probes_ibb_source(doc, t + 1) >= 0)) {
            doc[t] = (uint16_t)('0' + rng_below(r, PROBE_BB_NTRIG));
            continue;
        }
        doc[t] = (uint16_t)bigram_next(P, A, prev, r);
    }
}

static void make_mark(uint16_t* doc, const ProbeParams* p, Rng* r) {
    const int A = p->alphabet, T = p->T;
    double P[26 * 26];
    probes_bb_table(P, A);
    int m = 2 + (int)rng_below(r, (uint64_t)(T / 2 - 1)); // the mark, in [2, T/2]
    doc[1] = (uint16_t)('a' + rng_below(r, (uint64_t)A));
    int last = doc[1]; // the letter the bigram chain continues from
    for (int t = 2; t < T; t++) {
        if (t == m) {
            doc[t] = PROBE_MARK;
        } else if (doc[t - 1] == PROBE_QUERY) {
            doc[t] = doc[m - 1];
        } else if (t > m && doc[t - 1] != PROBE_MARK &&
                   rng_below(r, (uint64_t)p->trigger_every) == 0) {
            doc[t] = PROBE_QUERY;
        } else {
            doc[t] = (uint16_t)bigram_next(P, A, last, r);
            last = doc[t];
        }
    }
}

// One document of p->T tokens. `index` spreads passkey documents evenly over the buckets.
static void probes_make_doc(uint16_t* doc, const ProbeParams* p, Rng* r, uint64_t index) {
    doc[0] = PROBE_EOT;
    switch (p->task) {
    case PROBE_TASK_TRIGGER:
        make_trigger(doc, p, r);
        break;
    case PROBE_TASK_RECALL:
        make_recall(doc, p, r);
        break;
    case PROBE_TASK_PASSKEY:
        make_passkey(doc, p, r, index);
        break;
    case PROBE_TASK_BB:
        make_bb(doc, p, r, 0);
        break;
    case PROBE_TASK_IBB:
        make_bb(doc, p, r, 1);
        break;
    case PROBE_TASK_MARK:
        make_mark(doc, p, r);
        break;
    default:
        make_copy(doc, p, r);
        break;
    }
}

uint16_t* probes_generate(const ProbeParams* p, uint64_t seed, size_t ndocs) {
    uint16_t* out = mallocCheck(ndocs * (size_t)p->T * sizeof(uint16_t));
    Rng r;
    rng_seed(&r, seed);
    for (size_t i = 0; i < ndocs; i++)
        probes_make_doc(out + i * (size_t)p->T, p, &r, i);
    return out;
}

int probes_write(const char* dir, const ProbeParams* p, size_t ntrain, size_t nval, uint64_t seed,
                 char* err, size_t errcap) {
    if (probes_validate(p, err, errcap)) return -1;
    if (util_mkdirs(dir, err, errcap)) return -1;
    const char* split[2] = {"train", "val"};
    size_t n[2] = {ntrain, nval};
    // The validation stream is seeded apart from the training stream.
    uint64_t seeds[2] = {seed, seed ^ 0x9e3779b97f4a7c15ULL};
    for (int s = 0; s < 2; s++) {
        if (n[s] == 0) {
            snprintf(err, errcap, "the %s split needs at least one document", split[s]);
            return -1;
        }
        char path[2048];
        snprintf(path, sizeof(path), "%s/%s_%s_000000.bin", dir, probes_task_name(p->task),
                 split[s]);
        uint16_t* tok = probes_generate(p, seeds[s], n[s]);
        int rc = shard_write(path, tok, n[s] * (size_t)p->T, err, errcap);
        free(tok);
        if (rc) return -1;
    }
    return 0;
}

static int is_lower(int c) {
    return c >= 'a' && c <= 'z';
}
static int is_upper(int c) {
    return c >= 'A' && c <= 'Z';
}

int probes_answers(int8_t* bucket, const uint16_t* doc, int T, int task) {
    for (int t = 0; t < T; t++)
        bucket[t] = -1;
    if (T < 4 || doc[0] != PROBE_EOT) return -1;
    int n = 0;
    if (task == PROBE_TASK_TRIGGER) {
        for (int p = 2; p < T; p += 2) {
            int x = doc[p - 1];
            if (x != PROBE_TRIGGER && !is_lower(x)) return -1;
            bucket[p] = (int8_t)(x == PROBE_TRIGGER ? 0 : 1);
            n++;
        }
        return n;
    }
    if (task == PROBE_TASK_BB || task == PROBE_TASK_IBB) {
        if (!is_lower(doc[1])) return -1;
        for (int t = 2; t < T; t++) {
            int x = doc[t - 1], y = doc[t];
            if (!is_lower(y) && !bb_is_trigger(y)) return -1;
            if (bb_is_trigger(x)) {
                if (!is_lower(doc[t - 2])) return -1; // a trigger follows a letter
                int src = task == PROBE_TASK_BB ? t - 2 : probes_ibb_source(doc, t);
                if (src < 0 || y != doc[src]) return -1; // not a (induction) backcopy
                bucket[t] = 0;
            } else {
                bucket[t] = 1;
            }
            n++;
        }
        return n;
    }
    if (task == PROBE_TASK_MARK) {
        int m = -1;
        for (int t = 1; t < T; t++)
            if (doc[t] == PROBE_MARK) {
                if (m >= 0 || t < 2 || t > T / 2) return -1; // one mark, in [2, T/2]
                m = t;
            }
        if (m < 0 || !is_lower(doc[1]) || !is_lower(doc[m - 1])) return -1;
        for (int t = 2; t < T; t++) {
            int x = doc[t - 1], y = doc[t];
            if (x == PROBE_QUERY) {
                if (y != doc[m - 1]) return -1; // not the letter before the mark
                bucket[t] = 0;
            } else {
                if (y == PROBE_QUERY && (t < m || x == PROBE_MARK)) return -1;
                if (!is_lower(y) && y != PROBE_QUERY && t != m) return -1;
                bucket[t] = 1;
            }
            n++;
        }
        return n;
    }
    if (task == PROBE_TASK_PASSKEY) {
        if (T < 8 || doc[T - 2] != PROBE_QUERY) return -1;
        int needle = -1;
        for (int t = 1; t + 1 <= T - 3; t++)
            if (doc[t] == PROBE_NEEDLE) {
                needle = t;
                break;
            }
        if (needle < 0 || !is_upper(doc[needle + 1])) return -1;
        bucket[T - 1] = (int8_t)passkey_bucket(needle - 1, T);
        return 1;
    }
    int sep = -1;
    for (int t = 1; t < T; t++)
        if (doc[t] == PROBE_SEP) {
            sep = t;
            break;
        }
    if (sep < 0) return -1;
    if (task == PROBE_TASK_RECALL) {
        for (int p = sep + 2; p < T && is_lower(doc[p - 1]); p += 2) {
            bucket[p] = 0;
            n++;
        }
        return n;
    }
    if (task == PROBE_TASK_COPY) {
        int L = sep - 1;
        for (int p = sep + 1; p <= sep + L && p < T; p++) {
            bucket[p] = 0;
            n++;
        }
        return n;
    }
    return -1;
}

long probes_doc_len(const uint16_t* tok, size_t n) {
    if (n == 0 || tok[0] != PROBE_EOT) return -1;
    for (size_t i = 1; i < n; i++)
        if (tok[i] == PROBE_EOT) return (long)i;
    return (long)n;
}

int probes_argmax(const float* logits, int V) {
    int best = 0;
    for (int i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

void probes_score_doc(ProbeScore* s, int task, const uint16_t* doc, int T, const float* logits,
                      size_t stride, int V) {
    int8_t* bucket = mallocCheck((size_t)T);
    s->docs++;
    if (probes_answers(bucket, doc, T, task) < 0) {
        s->malformed++;
        free(bucket);
        return;
    }
    for (int t = 1; t < T; t++) {
        if (bucket[t] < 0) continue;
        int pred = probes_argmax(logits + (size_t)(t - 1) * stride, V);
        s->total[bucket[t]]++;
        if (pred == doc[t]) s->correct[bucket[t]]++;
    }
    free(bucket);
}

double probes_accuracy(const ProbeScore* s, int bucket) {
    long c = 0, n = 0;
    for (int b = 0; b < PROBE_MAX_BUCKETS; b++) {
        if (bucket >= 0 && b != bucket) continue;
        c += s->correct[b];
        n += s->total[b];
    }
    return n ? (double)c / (double)n : -1.0;
}
