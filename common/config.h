// common/config.h: the run configuration of attnlab: one table of keys (type, default, range,
// help) drives the parser of `key = value` files (with `include = other.conf` and `#` comments),
// the `key=value` / `--key=value` command-line overrides, `--help`, and the resolved config file
// written into out_dir. Keys `attn.<name>` are kept raw (with the file and line they came from);
// the attention layer validates them against the chosen variant's hyperparameters.
#ifndef ATTNLAB_CONFIG_H
#define ATTNLAB_CONFIG_H

#include <stdio.h>

#define CONFIG_STR      256
#define CONFIG_MAX_ATTN 32

typedef struct {
    char key[64]; // full key, e.g. "attn.alpha"
    char value[CONFIG_STR];
    char origin[300]; // "configs/x.conf:12" or "command line"
} ConfigKV;

typedef struct {
    // ---- model
    int n_layer, n_head, n_embd, block_size, vocab_size;
    char pos_encoding[32];      // learned | rope | alibi | none
    int qk_norm;                // 0/1: qk-layernorm of q and k per head (attention/qknorm.c)
    char qk_norm_kind[16];      // layernorm | rmsnorm (attention.h attn_qknorm_name)
    char residual[32];          // standard | attnres | delta_attnres (model/residual.h)
    int value_residual;         // 0/1: ResFormer value residual (model/value_residual.h)
    int mlp;                    // 1: blocks have an MLP; 0: attention-only blocks
    char init_from[CONFIG_STR]; // scratch | PATH | llmc:PATH | hf:DIR
    // ---- attention
    char attention[CONFIG_STR]; // variant name (or per-layer spec "0-3:softmax,4-11:ssmax")
    ConfigKV attn[CONFIG_MAX_ATTN];
    int n_attn;
    // ---- data
    char train_data[CONFIG_STR], val_data[CONFIG_STR]; // globs of llm.c shards
    char mc_data[CONFIG_STR];                          // multiple-choice set (data/mc.h)
    char tokenizer[32];                                // gpt2 | byte
    char tokenizer_dir[CONFIG_STR];                    // where vocab.bpe / encoder.json live
    int shuffle;                                       // 0 sequential, 1 seeded shuffle
    // ---- training
    int batch_size, seq_len, max_steps, grad_accum, threads, resume;
    int overwrite;                  // 1: a new run into a used out_dir deletes its run files first
    char resume_change[CONFIG_STR]; // keys a resume may change (comma-separated; recorded)
    int zero;                       // data parallel: 1 shards the optimizer state (ZeRO-1)
    char dp_reduce[16];             // data parallel: chain | allreduce (optim/data_parallel.h)
    float dist_timeout; // data parallel: seconds without progress before the job is aborted
    char precision[16]; // fp32 | bf16 | auto | bf16_ref: the matmuls' precision
    long long seed;
    // ---- optimizer
    char optimizer[32];   // adamw (| sgd | signsgd | lion as they land)
    char lr_schedule[32]; // cosine | constant | linear | wsd
    float lr, min_lr, weight_decay, beta1, beta2, eps, grad_clip;
    char weight_decay_mode[16]; // coupled | independent (optim/optim.h optim_wd_mode_name)
    float z_loss;               // coefficient of the auxiliary z-loss (log Z)^2 per token
    int warmup_steps;
    int decay_steps;      // wsd: steps of the final decay (0: decay_fraction of max_steps)
    float decay_fraction; // wsd: the decay's share of max_steps when decay_steps = 0
    // ---- output
    char out_dir[CONFIG_STR];
    int log_every, eval_every, eval_steps, metrics_every, checkpoint_every, sample_every;
    int sample_tokens, keep_last, dump_attention_every;
    float sink_eps;      // sink-rate threshold (Gu et al.: 0.3)
    int probe_sequences; // diagnostics probe sequences over the validation split
    char nan_policy[16]; // stop | skip
    int max_skips;       // with nan_policy=skip: stop after this many consecutive skips
    int eval_seq_len;    // 0 = seq_len
    int mc_examples;     // mc_data examples per evaluation; 0 = all
} Config;

typedef enum { CF_INT, CF_LONG, CF_FLOAT, CF_STR } ConfigType;

typedef struct {
    const char* key;
    ConfigType type;
    size_t offset;       // offsetof(Config, field)
    size_t size;         // for CF_STR: the char array's size
    const char* def;     // default, as text
    double min, max;     // inclusive range for numbers; for CF_STR min is the minimum length
    const char* choices; // for CF_STR: "a|b|c", or NULL for free text
    const char* group;   // "model", "attention", "data", "training", "optimizer", "output"
    const char* help;
} ConfigField;

extern const ConfigField CONFIG_FIELDS[];
extern const int CONFIG_NFIELDS;

// Fill every field with its default.
void config_defaults(Config* c);

// Parse a config file (following includes, relative to the including file, depth <= 16).
// Returns 0, or -1 with `err` = "FILE:LINE: unknown key 'lrr' (did you mean 'lr'?)" etc.
int config_load(Config* c, const char* path, char* err, size_t errcap);

// Parse config text held in memory (the `key = value` format, as config_load reads from a
// file), e.g. the resolved config saved in a checkpoint. Settings are applied to c as they come;
// origins and errors read "NAME:LINE" (NAME: the text's source, e.g. "CKPT (saved config)");
// `include` is relative to the working directory. Returns 0, or -1 with err.
int config_load_text(Config* c, const char* text, const char* name, char* err, size_t errcap);

// Apply one override "key=value" or "--key=value". Returns 0 or -1 with err naming the key.
int config_apply_arg(Config* c, const char* arg, char* err, size_t errcap);

// Cross-field checks (n_embd % n_head == 0, seq_len <= block_size, ...). 0 or -1 with err.
int config_validate(const Config* c, char* err, size_t errcap);

// Value of attn.<name> (name without the "attn." prefix) or NULL; *origin gets where it was set.
const char* config_attn_get(const Config* c, const char* name, const char** origin);

// Write the fully resolved config (every key, then every attn.* key) as a loadable file.
int config_write(const Config* c, FILE* f);

// Print `--help`: every key grouped, with type, default, range/choices and meaning.
void config_print_help(FILE* f);

// Closest key among the table (Levenshtein) for "did you mean" hints; NULL if none is close.
const char* config_closest_key(const char* key);

// The table entry of `key` (not attn.*), or NULL.
const ConfigField* config_field(const char* key);

// The value of field `f` of `c` as config text (unquoted), e.g. "0.000600000028" or "softmax".
void config_format_value(char* buf, size_t cap, const Config* c, const ConfigField* f);

#endif
