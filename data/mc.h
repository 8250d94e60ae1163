// data/mc.h: multiple-choice evaluation sets (HellaSwag and the like), their scoring rules and
// the bits-per-byte of evaluated text.
//
// Two file formats are read, told apart by their first bytes:
//   llm.c's evaluation file (karpathy/llm.c dev/data/data_common.py, write_evalfile; read there by
//     llmc/dataloader.h, EvalLoader): an int32[256] header (magic 20240522, version 1, number of
//     examples, bytes of the longest example), then per example a uint16 stream: the delimiter
//     65535, the example's size in bytes (the stream from the delimiter on), its index, its label,
//     the number of completions, the context's length and tokens, and each completion's length and
//     tokens. dev/data/hellaswag.py writes the context as encode(ctx) and each completion as
//     encode(" " + ending).
//   HellaSwag's own JSONL (rowanz/hellaswag data/hellaswag_val.jsonl): one object per line with
//     "ctx" (string), "endings" (array of strings) and "label" (integer); other fields are
//     ignored. Tokenised as llm.c's hellaswag.py does: encode(ctx) and encode(" " + ending), with
//     the caller's tokenizer (attnlab's GPT-2 BPE or bytes).
//
// Every reader error names the file and the example (and, for JSONL, the line): a bad magic or
// version, a truncated file or example, a missing delimiter, an example whose stated size, index
// or longest-example header disagrees with its contents, fewer than 2 completions, a label >= the
// number of completions, an empty context or completion, a token id >= the model's vocab_size,
// bytes after the last example, malformed JSON or a missing field.
//
// Scoring (mc_pick): with ll_c the summed log-likelihood of completion c's tokens given the
// context, n_c its token count and b_c the bytes of its ending's text (the completion without the
// one leading space both formats put before it):
//   acc             argmax_c ll_c          llm.c hellaswag.py `pred` (argmin of the summed loss),
//                                          lm-evaluation-harness `acc`
//   acc_norm        argmax_c ll_c / n_c    llm.c hellaswag.py `pred_norm` and EvalLoader (mean
//                                          loss per completion token)
//   acc_norm_bytes  argmax_c ll_c / b_c    lm-evaluation-harness `acc_norm` (which divides by
//                                          len(choice), Python characters: the same as bytes
//                                          for ASCII text)
// Ties go to the lowest index (numpy's argmax, torch's argmin).
//
// Context window (mc_run): a model reads at most `window` tokens. Completion c is scored on the
// input (context + completion) without its last token; when that is longer than the window the
// context is cut from the left, completion by completion, as lm-evaluation-harness does
// ((context + completion)[-(window + 1):][:-1]); a completion of more than `window` tokens cannot
// be scored and is refused (mc_check_window), naming the file and the example.
#ifndef ATTNLAB_MC_H
#define ATTNLAB_MC_H

#include <stddef.h>

#include "common/json.h"
#include "common/runlog.h"
#include "data/tokenizer.h"

#define MC_MAGIC           20240522
#define MC_VERSION         1
#define MC_HEADER_INTS     256
#define MC_DELIMITER       65535
#define MC_MAX_COMPLETIONS 64

typedef struct {
    int label;       // the correct completion, < ncomp
    int ncomp;       // completions (2..MC_MAX_COMPLETIONS)
    int ctx_len;     // context tokens (>= 1)
    int* ctx;        // ctx_len ids
    int** comp;      // completion c: comp_len[c] ids (>= 1)
    int* comp_len;   // ncomp
    int* comp_bytes; // ncomp: bytes of each ending's text (>= 1); 0: unknown
    int* buf;        // owns the ids and both counts (comp is a separate allocation)
} McExample;

typedef struct {
    char path[1024];
    const char* format; // "llm.c eval file" or "JSONL"
    int n;              // examples
    McExample* ex;
    int have_bytes; // every comp_bytes is known (acc_norm_bytes can be computed)
} McSet;

// Read `path` (either format) into s. tok: needed for JSONL (it tokenises) and, for the llm.c
// format, used to decode the completions into their byte lengths (NULL: bytes unknown, no
// acc_norm_bytes). Token ids must be < vocab. 0, or -1 with err naming the file and the example.
int mc_load(McSet* s, const char* path, Tokenizer* tok, int vocab, char* err, size_t errcap);
void mc_free(McSet* s);

// 0 when every completion of the first `limit` examples (0: all) fits a window of `window`
// tokens, else -1 with err naming the file, the example and the completion.
int mc_check_window(const McSet* s, int limit, int window, char* err, size_t errcap);

// The longest row (context + completion - 1 tokens, the context cut to the window) of the first
// `limit` examples (0: all): the length a forward needs.
int mc_longest_row(const McSet* s, int limit, int window);
// The most completions of an example among the first `limit` (0: all).
int mc_most_completions(const McSet* s, int limit);

// The picks of one example: pick[0] for acc, pick[1] for acc_norm, pick[2] for acc_norm_bytes
// (-1 when any nbytes[c] <= 0).
void mc_pick(const double* ll, const int* ntok, const int* nbytes, int n, int pick[3]);

// Scores completions: ll[c] = sum over completion c's tokens of log p(token | what precedes it),
// for c < n, where completion c follows the context ctx[c][0..ctx_len[c]) (the example's context,
// already cut to the window). 0; -1 when a row is longer than the model can read; -2 when a
// log-likelihood is not finite.
typedef int (*McScoreFn)(void* model, const int* const* ctx, const int* ctx_len,
                         const int* const* comp, const int* comp_len, int n, double* ll);

typedef struct {
    int n;          // examples scored
    int correct[3]; // acc, acc_norm, acc_norm_bytes
    int truncated;  // examples whose context was cut to fit the window
    int have_bytes;
    double* ll; // in (optional): every completion's ll, example by example, in order
} McResult;

// Score the first `limit` examples (0: all) with fn and tally the three accuracies. The window
// must have passed mc_check_window. 0, or -1 with err when fn fails.
int mc_run(const McSet* s, int limit, int window, McScoreFn fn, void* model, McResult* r, char* err,
           size_t errcap);

// Accuracy of a tally (NaN for n = 0 or, k = 2, without bytes).
double mc_accuracy(const McResult* r, int k);

// The trainer's evaluation: mc_run on s, then the record {"step", "kind": "mc", "file",
// "examples", "acc", "acc_norm", "acc_norm_bytes" (null without bytes), "truncated"} to
// metrics.jsonl, a "s:STEP mc_acc:..." line to main.log and a console line. 0, or -1 with err.
int mc_log(const McSet* s, int limit, int window, McScoreFn fn, void* model, long step, RunLog* rl,
           JsonBuf* j, char* err, size_t errcap);

// ---- bits per byte of evaluated text
// Bytes of the text that ids[0..n) decode to; the end-of-text token counts 0 (it separates
// documents, it is no text). -1 for an id the tokenizer lacks.
long long mc_text_bytes(const Tokenizer* tok, const int* ids, size_t n);
// bits per byte = nats_per_token * tokens / (bytes * ln 2): the loss in nats per token, turned
// into the bits per byte of the same text (NaN for bytes = 0).
double mc_bits_per_byte(double nats_per_token, double tokens, double bytes);

#endif
