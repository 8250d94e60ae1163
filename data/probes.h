// data/probes.h: synthetic probe tasks for comparing attention variants. Each generator writes
// ordinary llm.c shards in the byte vocabulary (ids 0-255, EOT = 256, vocab_size = 257) made of
// fixed-length documents of T tokens that each start with EOT, so a run with seq_len = T trains
// on whole documents with no special data path. Answer positions (the tokens a model has to get
// right) are recovered from the tokens alone, so evaluation needs only the shard.
//
// Tasks (letters are ASCII bytes):
//   trigger  EOT x1 y1 x2 y2 ...: x is a symbol from 'a'.. (attn alphabet) or the trigger '!';
//            y is '.' (no-op) after a symbol and, after '!', the most frequent symbol among all
//            preceding x (ties: the smallest). A discrete version of "output the mean of the
//            preceding representations on a trigger, 0 otherwise": the no-op answers ask a head
//            to do nothing. Buckets: trigger, noop.
//   recall   EOT k1 v1 ... kP vP '|' q1 a1 q2 a2 ...: P distinct keys 'a'.. with values 'A'..;
//            each query key is one of the P keys and its answer is its value (multi-query
//            associative recall). One '.' pads an odd remainder. Bucket: all.
//   passkey  EOT filler... '#' K filler... '?' K: lowercase filler, the needle '#' K (K an
//            uppercase letter) at a depth drawn inside the start, middle or end third of the
//            filler, and the answer K in the last position. Buckets: start, middle, end.
//   copy     EOT s1..sL '|' s1..sL '.'...: a random letter segment of length L (uniform in
//            [1, copy_len]), a separator, its copy, padding. Bucket: all.
//   bb       Bigram-Backcopy (Guo et al. 2024, "Active-Dormant Attention Heads"): EOT x1 x2 ...
//            over the letters 'a'.. (alphabet) and the PROBE_BB_NTRIG trigger tokens '0' '1' '2'.
//            x1 is a uniform letter; after a letter the next token is a trigger with probability
//            1/trigger_every, else a letter drawn from a fixed bigram table (probes_bb_table);
//            after a trigger the next token copies the token before the trigger. Buckets:
//            backcopy (deterministic, after a trigger), bigram (after a letter; its ceiling is
//            the table's top-1 probability).
//   ibb      induction Bigram-Backcopy: the bb layout, but after a trigger the next token is
//            the letter that followed the most recent earlier occurrence of the letter before
//            the trigger (an induction lookup: x ... x y ... x TRIG -> y). A trigger is placed
//            only after a letter that occurred before with a letter after it. One attention
//            layer cannot answer it (the query must know the letter before the trigger and the
//            keys the letter before them), so the copy head sits in layer >= 1 and has nothing
//            to do on the bigram positions: the active-dormant setting of Guo et al. one layer
//            up. Buckets: induction (after a trigger), bigram.
//   mark     bigram letters as in bb with one mark '^' at a uniform position in [2, T/2] and,
//            after it, the query '?' after a letter with probability 1/trigger_every; after '?'
//            comes the letter that preceded the mark. Letters continue the bigram chain from
//            the letter before (a '^' or an answer is skipped over: the letter after '^'
//            follows the letter before '^'). One layer cannot answer it (the keys at the mark
//            do not hold the letter before it until a layer has copied it there), so the
//            recall head sits in layer >= 1, and on every other position the letter it would
//            fetch is noise: a head that must do nothing most of the time. Buckets: recall
//            (after '?'), bigram.
#ifndef ATTNLAB_PROBES_H
#define ATTNLAB_PROBES_H

#include <stddef.h>
#include <stdint.h>

#include "common/rng.h"

#define PROBE_EOT         256
#define PROBE_VOCAB       257
#define PROBE_NOOP        '.'
#define PROBE_TRIGGER     '!'
#define PROBE_SEP         '|'
#define PROBE_QUERY       '?'
#define PROBE_NEEDLE      '#'
#define PROBE_MARK        '^'
#define PROBE_MAX_BUCKETS 4
#define PROBE_BB_NTRIG    3 // trigger tokens of the bb task: '0', '1', '2'

enum {
    PROBE_TASK_TRIGGER,
    PROBE_TASK_RECALL,
    PROBE_TASK_PASSKEY,
    PROBE_TASK_COPY,
    PROBE_TASK_BB,
    PROBE_TASK_IBB,
    PROBE_TASK_MARK,
    PROBE_NTASKS
};

typedef struct {
    int task;
    int T;             // document length in tokens, EOT included
    int alphabet;      // symbols drawn from: trigger 'a'.. (default 4), recall values 'A'..,
                       // passkey filler 'a'.. and keys 'A'.., copy letters 'a'.. (default 26)
    int pairs;         // recall: key-value pairs per document (1..26, default 8)
    int trigger_every; // probability 1/trigger_every (8) of a trigger (mark: of a query)
    int copy_len;      // copy: longest segment (0: (T-2)/2)
    int bucket_mask;   // passkey: buckets generated, bit 0 start, 1 middle, 2 end (default 7)
} ProbeParams;

// Correct and total answers per bucket.
typedef struct {
    long correct[PROBE_MAX_BUCKETS];
    long total[PROBE_MAX_BUCKETS];
    long docs;
    long malformed; // documents whose answers could not be located
} ProbeScore;

// "trigger", "recall", "passkey", "copy", "bb", "ibb", "mark"; -1 for an unknown name.
int probes_task_from_name(const char* name);
const char* probes_task_name(int task);
int probes_nbuckets(int task);
const char* probes_bucket_name(int task, int bucket);

// The ibb answer source: for a position t whose previous token is a trigger, the position of
// the letter that followed the most recent occurrence of doc[t-2] before t-2 (the token at t
// must equal doc[source]); -1 when there is none.
int probes_ibb_source(const uint16_t* doc, int t);

// The bigram table of the bb, ibb and mark tasks over `alphabet` letters (row i: the
// distribution of the letter after letter i; row-major, alphabet x alphabet). It is part of the
// tasks' definition, fixed for an alphabet size and independent of the data seed: row i puts
// weight 1/(r+1)^1.5 on the letter of rank r in a permutation drawn from a fixed stream.
void probes_bb_table(double* P, int alphabet);

// Defaults for `task` at document length T.
void probes_defaults(ProbeParams* p, int task, int T);
// 0, or -1 with err naming the parameter that is out of range.
int probes_validate(const ProbeParams* p, char* err, size_t errcap);

// ndocs documents from `seed` (malloc'd, ndocs * T tokens).
uint16_t* probes_generate(const ProbeParams* p, uint64_t seed, size_t ndocs);
// DIR/<task>_train_000000.bin (ntrain documents from seed) and DIR/<task>_val_000000.bin (nval
// documents from an independent stream of the same seed). 0, or -1 with err.
int probes_write(const char* dir, const ProbeParams* p, size_t ntrain, size_t nval, uint64_t seed,
                 char* err, size_t errcap);

// bucket[t] = bucket of the answer at position t (predicted from position t-1), -1 elsewhere.
// Returns the number of answers, or -1 when the document does not have the task's layout.
int probes_answers(int8_t* bucket, const uint16_t* doc, int T, int task);

// Document length of a token stream of EOT-led documents: the distance between the first two
// EOTs (or n when there is only one, at 0). -1 if the stream does not start with EOT.
long probes_doc_len(const uint16_t* tok, size_t n);

// Argmax over ids [0, V) (ties: the smallest id).
int probes_argmax(const float* logits, int V);
// Score one document: logits row t (V used entries, rows `stride` floats apart) predicts token
// t+1; each answer counts correct when the argmax equals it.
void probes_score_doc(ProbeScore* s, int task, const uint16_t* doc, int T, const float* logits,
                      size_t stride, int V);
// Accuracy of one bucket, or of all answers when bucket < 0; -1 when there are none.
double probes_accuracy(const ProbeScore* s, int bucket);

#endif
