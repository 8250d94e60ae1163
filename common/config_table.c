// common/config_table.c: the table of config keys (CONFIG_FIELDS: type, default, range or
// choices, group and help of every key) and the lookup of a key in it. The parser and the
// defaults (config.c), one field's checks and text (config_field.c), the validation
// (config_check.c), --help and the resolved config written into out_dir are all driven by this
// one table. It is the bottom of the config sources (config_check.c -> resume_keys.c -> config.c
// -> config_field.c -> config_table.c) and calls none of the others.
#include <stddef.h>
#include <string.h>

#include "common/config.h"

// For CF_STR fields `min` is the minimum length: 0 lets the value be empty.
//
// Keys whose values are the names of an enum (pos_encoding: attention/attention.h attn_pos_name;
// residual: model/residual.h resid_name; precision: common/matmul.h mm_precision_name, plus
// MM_PRECISION_AUTO) list those names as their choices here, because the parser, --help and
// docs/configuration.md need them in common/, which cannot include attention/ or model/. Each
// name has one spelling in its enum's table; these choices strings are the config's declaration
// of that vocabulary, and tests/test_enum_names.c fails unless each is exactly its table's names
// (so an enum value added without a name, or without a choice here, is caught). Code converts the
// config's text with the table's x_from_name, never with strcmp against a literal.
#define F_INT(k, field, def, lo, hi, grp, hlp)                                                     \
    { k, CF_INT, offsetof(Config, field), sizeof(int), def, lo, hi, NULL, grp, hlp }
#define F_LONG(k, field, def, lo, hi, grp, hlp)                                                    \
    { k, CF_LONG, offsetof(Config, field), sizeof(long long), def, lo, hi, NULL, grp, hlp }
#define F_FLOAT(k, field, def, lo, hi, grp, hlp)                                                   \
    { k, CF_FLOAT, offsetof(Config, field), sizeof(float), def, lo, hi, NULL, grp, hlp }
#define F_STR(k, field, def, minlen, choices, grp, hlp)                                            \
    {                                                                                              \
        k, CF_STR, offsetof(Config, field), sizeof(((Config*)0)->field), def, minlen, 0, choices,  \
            grp, hlp                                                                               \
    }

const ConfigField CONFIG_FIELDS[] = {
    // ---- model
    F_INT("n_layer", n_layer, "12", 1, 256, "model", "number of transformer blocks"),
    F_INT("n_head", n_head, "12", 1, 256, "model", "attention heads per block; must divide n_embd"),
    F_INT("n_embd", n_embd, "768", 1, 16384, "model", "width of the residual stream (channels)"),
    F_INT("block_size", block_size, "1024", 1, 65536, "model",
          "maximum context length (size of the learned position table)"),
    F_INT("vocab_size", vocab_size, "50257", 1, 65536, "model",
          "vocabulary size: 50257 for gpt2, at least 257 for byte (256 bytes + EOT) (tokens are "
          "uint16)"),
    F_STR("pos_encoding", pos_encoding, "learned", 1, "learned|rope|alibi|none|xpos|fire", "model",
          "positions: learned table, rotary, ALiBi biases, none (causal mask only), xPos (rotary "
          "with exponential decay), or FIRE (a learned MLP of the normalised relative position, "
          "added to the logits)"),
    F_INT("qk_norm", qk_norm, "0", 0, 1, "model",
          "1: qk-layernorm (Wortsman et al. 2023): normalise every head's q and k (LayerNorm over "
          "the head's channels, no bias, eps 1e-6) times a learnable per-layer gain of head_size "
          "for q and one for k (shared by the heads, init 1, no weight decay), before the "
          "position encoding and the 1/sqrt(head_size) scale"),
    F_STR("qk_norm_kind", qk_norm_kind, "layernorm", 1, "layernorm|rmsnorm", "model",
          "with qk_norm = 1: layernorm (subtract the mean, divide by the standard deviation, as "
          "the paper) or rmsnorm (divide by the root mean square, no mean subtraction)"),
    F_STR("residual", residual, "standard", 1, "standard|attnres|delta_attnres", "model",
          "residual path: standard (x + f(x)); attnres (Attention Residuals, Kimi Team 2026: each "
          "sublayer's input is a softmax mix of the embedding and the earlier sublayer outputs, "
          "with a learned pseudo-query per sublayer); delta_attnres (Delta Attention Residuals, "
          "Luo et al. 2026: the residual stream plus a softmax mix of its per-sublayer deltas)"),
    F_INT("value_residual", value_residual, "0", 0, 1, "model",
          "1: ResFormer value residual (Zhou et al. 2024): layers 2..L use values "
          "l1*V_n + l2*V_1 with learnable per-layer l1, l2 (init 0.5, 0.5); layer 1 is unchanged"),
    F_INT("mlp", mlp, "1", 0, 1, "model",
          "1: every block has its MLP (and ln_2); 0: attention-only blocks (no MLP tensors)"),
    F_STR("init_from", init_from, "scratch", 1, NULL, "model",
          "scratch, an attnlab checkpoint PATH, llmc:PATH (llm.c model file) or hf:DIR"),
    // ---- attention
    F_STR("attention", attention, "softmax", 1, NULL, "attention",
          "variant name, or per-layer spec like 0-3:softmax,4-11:ssmax (./train "
          "--list-attention); its hyperparameters are attn.NAME keys"),
    // ---- data
    F_STR("train_data", train_data, "", 0, NULL, "data",
          "glob of training shards (llm.c .bin files), e.g. data_cache/x/train_*.bin"),
    F_STR("val_data", val_data, "", 0, NULL, "data",
          "glob of validation shards; empty: no validation"),
    F_STR("mc_data", mc_data, "", 0, NULL, "data",
          "multiple-choice set (llm.c evaluation file or HellaSwag JSONL) scored at every "
          "evaluation: acc, acc_norm, acc_norm_bytes in metrics.jsonl; empty: none"),
    F_STR("tokenizer", tokenizer, "gpt2", 1, "gpt2|byte", "data",
          "GPT-2 byte-level BPE, or raw bytes (ids 0-255)"),
    F_STR("tokenizer_dir", tokenizer_dir, "data_cache/gpt2", 1, NULL, "data",
          "directory holding the GPT-2 vocab.bpe and encoder.json"),
    F_INT("shuffle", shuffle, "0", 0, 1, "data",
          "0: shards and batches in order; 1: seeded reshuffle of both every epoch"),
    // ---- training
    F_INT("batch_size", batch_size, "4", 1, 65536, "training", "sequences per micro-batch (B)"),
    F_INT("seq_len", seq_len, "64", 1, 65536, "training",
          "tokens per training sequence (T); at most block_size"),
    F_INT("max_steps", max_steps, "100", 0, 1e9, "training", "optimizer steps to run"),
    F_INT("grad_accum", grad_accum, "1", 1, 65536, "training",
          "micro-batches accumulated into each optimizer step"),
    F_INT("threads", threads, "0", 0, 4096, "training", "OpenMP threads; 0: all cores"),
    F_INT("zero", zero, "0", 0, 1, "training",
          "data parallel (mpirun -np N): 1 shards the optimizer state over the ranks (ZeRO-1: "
          "reduce-scatter, shard update, all-gather); results are bit-identical to 0"),
    F_STR("dp_reduce", dp_reduce, "chain", 1, "chain|allreduce", "training",
          "data parallel: chain (the ranks pass the running gradient sum on in micro-batch "
          "order: bit-identical to one process) or allreduce (MPI_Iallreduce per gradient "
          "segment, overlapped with the backward; zero = 1: reduce-scatter; deterministic for a "
          "fixed N, not bit-identical to one process)"),
    F_FLOAT("dist_timeout", dist_timeout, "300", 1, 1e6, "training",
            "data parallel: seconds a rank waits for another in a collective before it aborts "
            "the job naming the rank it waited for"),
    F_STR("precision", precision, "fp32", 1, "fp32|bf16|auto|bf16_ref", "training",
          "matmul precision: fp32; bf16 (bf16 operands, fp32 accumulation and master weights, "
          "on oneDNN; refused without AVX512-BF16/AMX); auto (bf16 where native, else fp32); "
          "bf16_ref (bf16's portable reference: rounded operands, fp32 sgemm; slow)"),
    F_INT("resume", resume, "0", 0, 1, "training",
          "1: continue exactly from the latest checkpoint in out_dir (refused when a key that "
          "changes the computation differs from the checkpoint's, unless resume_change names it)"),
    F_INT("overwrite", overwrite, "0", 0, 1, "training",
          "1: a new run (resume = 0) into an out_dir that holds a run deletes that run's files "
          "(config, logs, checkpoints, attention dumps) first; 0: such a run is refused"),
    F_STR("resume_change", resume_change, "", 0, NULL, "training",
          "with resume = 1: comma-separated keys allowed to differ from the checkpoint's (e.g. "
          "max_steps,lr or attn.NAME); each change is recorded with its step in main.log, "
          "metrics.jsonl and config.conf"),
    F_LONG("seed", seed, "1337", 0, 9223372036854775807.0, "training",
           "seed for initialisation, data shuffling and sampling"),
    // ---- optimizer
    F_STR("optimizer", optimizer, "adamw", 1, "adamw|sgd|signsgd|lion", "optimizer", "update rule"),
    F_FLOAT("lr", lr, "6e-4", 0, 10, "optimizer", "peak learning rate (reached after warm-up)"),
    F_FLOAT("min_lr", min_lr, "6e-5", 0, 10, "optimizer",
            "final learning rate of the cosine or linear decay; at most lr"),
    F_INT("warmup_steps", warmup_steps, "10", 0, 1e9, "optimizer",
          "steps of linear warm-up to lr; at most max_steps (a value from a config file is "
          "capped at max_steps, with a note)"),
    F_STR("lr_schedule", lr_schedule, "cosine", 1, "cosine|constant|linear|wsd", "optimizer",
          "learning-rate decay from lr to min_lr after warm-up; wsd (warmup-stable-decay): lr "
          "until the last decay steps, then linear to min_lr, so a run extends cleanly"),
    F_INT("decay_steps", decay_steps, "0", 0, 1e9, "optimizer",
          "wsd: steps of the final linear decay to min_lr; 0: decay_fraction of max_steps"),
    F_FLOAT("decay_fraction", decay_fraction, "0.2", 0, 1, "optimizer",
            "wsd with decay_steps = 0: the decay's share of max_steps (rounded to a step)"),
    F_FLOAT("weight_decay", weight_decay, "0.1", 0, 10, "optimizer",
            "decoupled weight-decay coefficient"),
    F_STR("weight_decay_mode", weight_decay_mode, "coupled", 1, "coupled|independent", "optimizer",
          "coupled: p -= lr_t wd p (AdamW as PyTorch); independent: p -= (lr_t / lr) wd p, the "
          "decay follows the schedule but not the peak lr (Wortsman et al. 2023)"),
    F_FLOAT("z_loss", z_loss, "0", 0, 10, "optimizer",
            "coefficient of the auxiliary z-loss z_loss * (log Z)^2 per token (PaLM; Wortsman "
            "et al. 2023 use 1e-4), Z the sum of exp(logits); the logged train_loss stays the "
            "cross-entropy, the term is logged as z_loss"),
    F_FLOAT("beta1", beta1, "0.9", 0, 0.999999, "optimizer", "first-moment decay (adamw, lion)"),
    F_FLOAT("beta2", beta2, "0.95", 0, 0.999999, "optimizer",
            "second-moment decay (adamw; lion's momentum)"),
    F_FLOAT("eps", eps, "1e-8", 1e-30, 1, "optimizer", "adamw denominator epsilon"),
    F_FLOAT("grad_clip", grad_clip, "1.0", 0, 1e6, "optimizer",
            "clip the global gradient norm to this; 0: no clipping"),
    // ---- output
    F_STR("out_dir", out_dir, "out", 1, NULL, "output",
          "directory for checkpoints, metrics.jsonl, the log and the resolved config"),
    F_INT("log_every", log_every, "1", 1, 1e9, "output", "progress line every N steps"),
    F_INT("eval_every", eval_every, "50", 0, 1e9, "output",
          "validation loss every N steps (and at the end); 0: never"),
    F_INT("eval_steps", eval_steps, "10", 1, 1e6, "output", "validation batches per evaluation"),
    F_INT("mc_examples", mc_examples, "0", 0, 1e9, "output",
          "mc_data examples per evaluation (the first N); 0: all"),
    F_INT("metrics_every", metrics_every, "50", 0, 1e9, "output",
          "attention diagnostics (entropy, sink rate, kurtosis, head grad norms) every N "
          "steps; 0: never"),
    F_INT("checkpoint_every", checkpoint_every, "0", 0, 1e9, "output",
          "checkpoint every N steps; 0: only at the end"),
    F_INT("sample_every", sample_every, "0", 0, 1e9, "output",
          "print a generated sample every N steps; 0: never"),
    F_INT("sample_tokens", sample_tokens, "64", 1, 65536, "output", "tokens per sample"),
    F_INT("keep_last", keep_last, "3", 1, 1e6, "output",
          "periodic checkpoints kept; older ones are deleted"),
    F_INT("dump_attention_every", dump_attention_every, "0", 0, 1e9, "output",
          "write attention maps (.npy) every N steps; 0: never"),
    F_INT("probe_sequences", probe_sequences, "64", 1, 1e6, "output",
          "diagnostics probe: sequences spread evenly over the validation split (the training "
          "split without val_data)"),
    F_FLOAT("sink_eps", sink_eps, "0.3", 0, 1, "output",
            "a head counts as a sink when its mean attention to the first token exceeds this "
            "(Gu et al.: 0.3)"),
    F_STR("nan_policy", nan_policy, "stop", 1, "stop|skip", "output",
          "on a non-finite loss or gradient: stop (exit 3) or skip the step"),
    F_INT("max_skips", max_skips, "10", 1, 1e6, "output",
          "with nan_policy = skip: stop after this many consecutive skipped steps"),
    F_INT("eval_seq_len", eval_seq_len, "0", 0, 65536, "output",
          "validation sequence length (up to block_size, for length extrapolation); 0: seq_len"),
};
const int CONFIG_NFIELDS = (int)(sizeof(CONFIG_FIELDS) / sizeof(CONFIG_FIELDS[0]));

const ConfigField* config_field(const char* key) {
    for (int i = 0; i < CONFIG_NFIELDS; i++)
        if (strcmp(CONFIG_FIELDS[i].key, key) == 0) return &CONFIG_FIELDS[i];
    return NULL;
}
