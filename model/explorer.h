// model/explorer.h: the attention explorer, one self-contained HTML page per run (or per pair
// of runs on the same text). The page (model/explorer.html, compiled into the binary) holds its
// JavaScript, CSS and data inline: no server, no network, it opens from a file.
//
// Data of one run, in the page as one base64 string of a zlib stream (the browser inflates it
// with DecompressionStream('deflate')) of, for the nl*nh heads in (layer, head) order and rows
// t = 0..T-1 of each head:
//   lo    float32 [nl*nh*T]  row minimum, min(0, min_j a_tj)
//   step  float32 [nl*nh*T]  quantisation step of the row, (max(0, max_j a_tj) - lo) / 255
//   sum   float32 [nl*nh*T]  exact row sum  sum_{j<=t} a_tj  (in double, rounded once)
//   q     uint8   [nl*nh*T*(T+1)/2]  causal entries only, row t has t+1 bytes:
//         q_tj = round((a_tj - lo) / step), so a_tj = lo + q_tj * step within step / 2
// (rows with step 0, all weights equal to lo, store q = 0). Weights are never renormalised:
// variants whose rows do not sum to 1 keep their raw values and the page states the sums.
//
// Size bound (checked before writing): raw = nl*nh*(12*T + T*(T+1)/2) bytes per run; the zlib
// stream is at most compressBound(raw); base64 makes that 4/3 larger; the rest (template, stats,
// tokens, metrics lines) is explorer_page_bound's remainder. GPT-2 124M (12 x 12) at T = 1024:
// raw = 77.3 MB, worst-case page 103 MB per run; real maps compress several times.
//
// Per head the page also gets statistics of this text's maps, under the keys and definitions of
// metrics.jsonl's head records (the MF_MAP rows of model/metrics_table.h: entropy, entropy_norm,
// sink_mass, sink_mass_raw, max_weight, sparsity, alpha0, alpha0_raw, alpha0_renorm, with the
// text as the only sequence), plus the min / mean / max raw row sum over t (rowsum_min,
// rowsum_mean, rowsum_max) and whether any weight is negative (negative).
#ifndef ATTNLAB_EXPLORER_H
#define ATTNLAB_EXPLORER_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char* label;   // shown over the run's pane (e.g. the checkpoint path)
    const char* sidecar; // the maps' .json sidecar text (tokens, token_strings, layers, heads,
                         // variant, step: model/metrics.h metrics_write_attention)
    const float* maps;   // (nl, nh, T, T), row t holds keys 0..t (entries above are ignored)
    int nl, nh, T;
    const char* metrics;      // metrics.jsonl text of the run, or NULL; its "head" and "model"
                              // records go into the page (other lines are left out)
    const char* metrics_path; // named in messages and in the page
} ExplorerRun;

// Quantise one causal row a[0..n) (layout above). q gets n bytes.
void explorer_quantize_row(const float* a, int n, uint8_t* q, float* lo, float* step);

// Bytes of the uncompressed data of one run, and an upper bound of the whole page's size.
size_t explorer_raw_bytes(int nl, int nh, int T);
size_t explorer_page_bound(const ExplorerRun* runs, int nruns);

// Write the page for runs[0..nruns) (1 or 2; the runs must share T and the tokens). Fails,
// writing nothing, if the bound exceeds max_bytes (0 = no limit), or on a write error, or if a
// sidecar is not a JSON object. *written gets the file size. 0, or -1 with err.
int explorer_write(const char* path, const ExplorerRun* runs, int nruns, const char* title,
                   size_t max_bytes, size_t* written, char* err, size_t errcap);

#endif
