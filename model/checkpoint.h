// model/checkpoint.h: model files and run state.
//
// attnlab model file (model_%08d.bin): int32[256] header (magic 20261130, version 1, sizes,
// pos_encoding [8], qk_norm [9], residual [17], value_residual [18], no-MLP flag [19],
// qk_norm_kind [20], step), the attention spec, the parameter table (name + size per tensor), the
// resolved config text, all parameters (fp32), and a trailer {crc32 of everything before it, end
// magic}. Run state (state_%08d.bin): a sectioned file (the loop's state, the loader's position,
// the optimizer's state), same trailer; common/run_state.h writes and reads it, the run composes it
// from the sections optim/ and data/ serialise (see docs/design.md). Both are written
// atomically (temp file, fsync, rename, directory fsync); resume
// takes the newest step whose model and state both verify, so a crash at any moment leaves the
// previous complete checkpoint usable.
//
// llm.c model file (magic 20240326, version 3): int32[256] header {magic, 3, maxT, V, L, NH, C,
// Vp}, then llm.c's 16 tensors in order, fp32, padded vocabulary. Read and written both ways.
#ifndef ATTNLAB_CHECKPOINT_H
#define ATTNLAB_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/run_state.h"
#include "common/util.h"
#include "model/gpt2.h"

#define CKPT_MAGIC     20261130
#define CKPT_VERSION   1
#define STATE_MAGIC    RUN_STATE_MAGIC // the run-state file (common/run_state.h)
#define CKPT_END_MAGIC UTIL_END_MAGIC  // "ALNK" (the trailer: common/util.h)
#define LLMC_MAGIC     20240326
#define LLMC_VERSION   3

// Save the model (params) with its config text. 0, or -1 with err; never damages `path` on error.
int ckpt_save_model(const GPT2* m, const char* path, long step, const char* config_text, char* err,
                    size_t errcap);

// Load parameters into a built model. strict=1 (resume): the attention spec and every tensor
// must match. strict=0 (init_from): tensors are matched by name and shape; those missing from
// the file keep their initial values and are listed in `note`. *step gets the saved step.
int ckpt_load_model(GPT2* m, const char* path, int strict, long* step, char* note, size_t notecap,
                    char* err, size_t errcap);

// Read just the header of an attnlab model file (for tools that build the model from it):
// fills `cfg` sizes, `attention` spec, the saved config text (malloc'd, caller frees) and step.
int ckpt_read_info(const char* path, GPT2Config* cfg, char* attention, size_t attcap,
                   char** config_text, long* step, char* err, size_t errcap);

// An attnlab model file open for reading: trailer verified, header, attention spec, tensor table
// and saved config text read (once), positioned at the parameters. ckpt_read_params then loads
// them into a model built to match (strict and non-strict as ckpt_load_model).
typedef struct {
    FILE* f;
    char path[1100];
    GPT2Config cfg;      // sizes and the settings from the header
    char attention[256]; // the attention spec saved
    char* config_text;   // the run's resolved config (NUL-terminated)
    long step;
    int ntensors;
    char (*names)[64]; // the tensor table
    int64_t* sizes;
} CkptFile;

int ckpt_open(CkptFile* cf, const char* path, char* err, size_t errcap);
int ckpt_read_params(CkptFile* cf, GPT2* m, int strict, char* note, size_t notecap, char* err,
                     size_t errcap);
void ckpt_close(CkptFile* cf);

// The trailer every attnlab checkpoint file (model and run-state) ends with, {crc32 of all bytes
// before it, end magic}, has one writer and one check: atomic_finish and util_verify_trailer
// (common/util.h).

// resume = 1: may a run with config `now` (resolved config text `now_text`) on `nranks` ranks
// continue exactly from the checkpoint whose model file is `model_path`? run_state_check_resume
// (common/run_state.h) on the config text the model file saved, with the settings table's rules
// (settings_resume_fixed: its .resume_fixed rows cannot change): the accepted key changes (named
// in resume_change) go into *changes, the saved text (malloc'd, the caller frees) into
// *saved_text; either may be NULL. 0, or -1 with err.
int ckpt_check_resume(const char* model_path, const Config* now, const char* now_text, int nranks,
                      ResumeChanges* changes, char** saved_text, char* err, size_t errcap);

// llm.c model files
int llmc_save(const GPT2* m, const char* path, char* err, size_t errcap);
// Read the llm.c header: sizes (maxT, V, L, NH, C, Vp).
int llmc_read_config(const char* path, GPT2Config* cfg, char* err, size_t errcap);
// Load llm.c's 16 tensors into a built model of matching sizes (variant tensors keep init), with
// the header read by llmc_read_config.
int llmc_load_params(GPT2* m, const char* path, const GPT2Config* header, char* err, size_t errcap);

// Newest step in dir with both model_%08d.bin and state_%08d.bin verifying; -1 if none.
// Damaged newer checkpoints are reported on stderr and skipped.
long ckpt_find_latest(const char* dir);
// Delete all but the newest `keep` checkpoint pairs in dir (keep <= 0: keep all).
void ckpt_prune(const char* dir, int keep);
// The pair of step `step` in dir: dir/model_<step>.bin and dir/state_<step>.bin (cap bytes each).
void ckpt_pair_paths(const char* dir, long step, char* model_path, char* state_path, size_t cap);
// The step a run with `resume` and `max_steps` continues from: the newest complete checkpoint in
// dir, rank 0's choice given to every rank (dist_bcast). -1 when there is none or resume = 0
// (resume = 1 says so on stdout: the run starts at step 0); -2 when that checkpoint already ends
// the run (said on stdout: nothing to do).
long ckpt_resume_step(const char* dir, int resume, int max_steps);

#endif
