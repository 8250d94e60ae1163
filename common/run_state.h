// common/run_state.h: the run-state file (state_NNNNNNNN.bin) of a checkpoint, a sectioned file
// (version 2): a header, then named sections, each an opaque byte blob its owner serialises and
// parses, then the checkpoint trailer (common/util.h). This module writes and reads the sections
// and owns one of them, "loop" (the loop's own state, LoopState); the others are the
// optimizer's "optim" (optim_state_put / optim_state_get, optim/optim.h) and the training
// loader's "data" (dataloader_state_put / dataloader_state_get, data/dataloader.h), which the
// trainer (train.c) composes. It needs only common/. Version-1 files (the fixed layout written
// before) are read too, presented as the same three sections. Layout: docs/design.md "Run state
// and checkpoints". The module also owns the optional "model" section: the step and the crc32
// of the parameters of the model file the state belongs with, which resume checks, so that a
// state file never resumes with another run's model file (files written before it have none).
// Also here: what a resumed run must keep for its saved data position to point at the same
// tokens, and which other keys it may change (run_state_check_resume, common/resume_keys.h).
#ifndef ATTNLAB_RUN_STATE_H
#define ATTNLAB_RUN_STATE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/config.h"
#include "common/resume_keys.h"
#include "common/rng.h"
#include "common/util.h"

#define RUN_STATE_MAGIC          20261131
#define RUN_STATE_VERSION        2  // written; versions 1 and 2 are read
#define RUN_STATE_HEADER_BYTES   12 // int32 magic, version, section count
#define RUN_STATE_NAME_BYTES     16 // a section's name: 1 to 15 characters, NUL-padded
#define RUN_STATE_SECTION_BYTES  (RUN_STATE_NAME_BYTES + 8) // name, uint64 payload length
#define RUN_STATE_MAX_SECTIONS   16
#define RUN_STATE_LOOP           "loop" // this module's section
#define RUN_STATE_LOOP_BYTES     48     // int64 step, RNG (4 x uint64), float best_val, int32 skips
#define RUN_STATE_PAIR           "model" // this module's optional section (run_state_put_pair)
#define RUN_STATE_PAIR_BYTES     16      // int64 step, uint32 crc32 of the parameters, uint32 0
#define RUN_STATE_V1_FIXED_BYTES 1160    // a version-1 file before its optimizer arrays
// the smallest version-2 body (header and loop section), for the trailer check of a directory scan
#define RUN_STATE_MIN_BYTES                                                                        \
    (RUN_STATE_HEADER_BYTES + RUN_STATE_SECTION_BYTES + RUN_STATE_LOOP_BYTES)

// What a checkpoint saves besides the model, the optimizer and the data position: the loop's own
// state.
typedef struct {
    long step;      // completed optimizer steps
    Rng rng;        // the sampling RNG
    float best_val; // best validation loss so far (or -1)
    int skips;      // consecutive skipped (non-finite) updates
} LoopState;

// ---- writing: run_state_create, then per owner section run_state_section + run_state_put of
// exactly its length, then run_state_finish. A failed write is reported by run_state_finish
// (nothing is left at path then); misuse (a section not filled, too many) is an assertion.
typedef struct {
    AtomicFile af;
    int nsections, begun; // sections the header declares (the loop's included), begun so far
    uint64_t left;        // payload bytes the open section still needs
    char names[RUN_STATE_MAX_SECTIONS][RUN_STATE_NAME_BYTES];
} RunStateWriter;

// Open path for an atomic write (common/util.h) and write the header, declaring `nsections`
// owner sections besides the loop section, and the loop section from *loop. 0, or -1 with err.
int run_state_create(RunStateWriter* w, const char* path, int nsections, const LoopState* loop,
                     char* err, size_t errcap);
// Begin section `name` of `size` payload bytes (the name unique in the file).
void run_state_section(RunStateWriter* w, const char* name, uint64_t size);
// n payload bytes of the open section.
void run_state_put(RunStateWriter* w, const void* data, size_t n);
// Append the trailer and commit (every declared section written in full). 0, or -1 with err.
int run_state_finish(RunStateWriter* w, char* err, size_t errcap);
// The "model" section (one of the declared owner sections): the model file this state belongs
// with, by its step and the crc32 of its parameters (run_state_params_crc).
void run_state_put_pair(RunStateWriter* w, long step, uint32_t params_crc);
// The crc32 of n float32 parameters as a model file stores them.
uint32_t run_state_params_crc(const float* params, size_t n);

// ---- reading
typedef struct {
    char name[RUN_STATE_NAME_BYTES];
    unsigned char head[64]; // bytes served before the file's (a version-1 file's translation)
    size_t nhead;
    uint64_t offset, size; // the payload's bytes in the file
} RunStateSection;

typedef struct {
    FILE* f;
    char path[1024];
    int version, nsections;
    RunStateSection sec[RUN_STATE_MAX_SECTIONS];
    const RunStateSection* cur; // the section run_state_find opened
    uint64_t done;              // bytes of it read so far
    LoopState loop;             // the loop section, read by run_state_open
} RunStateReader;

// Verify path's trailer, read its header and section table and the loop section into r->loop.
// The file must hold the loop section and every name in owners[0..nowners), each once, and no
// other (an unknown section is refused: it is state this build would drop). 0, or -1 with err
// naming the file (and the section): not a run-state file, another version, a section that runs
// past the end of the file, a missing, duplicate or unknown section, a checksum mismatch.
int run_state_open(RunStateReader* r, const char* path, const char* const* owners, int nowners,
                   char* err, size_t errcap);
// Start reading section `name`: its payload length into *size. 0, or -1 with err if missing.
int run_state_find(RunStateReader* r, const char* name, uint64_t* size, char* err, size_t errcap);
// The next n payload bytes of the section run_state_find opened. 0, or -1 with err naming the
// file and the section when it ends sooner or the read fails.
int run_state_get(RunStateReader* r, void* buf, size_t n, char* err, size_t errcap);
void run_state_close(RunStateReader* r);
// Does the state file r belong with the model file `model_path` of step `model_step` whose
// parameters have crc32 `params_crc`? Its loop step must be model_step and, where it has a
// "model" section (files written before it have none), so must that section's step and crc.
// 0, or -1 with err naming both files.
int run_state_check_pair(RunStateReader* r, const char* model_path, long model_step,
                         uint32_t params_crc, char* err, size_t errcap);

// Little-endian fields of the section payloads.
void run_state_put_u64(unsigned char* p, uint64_t v);
uint64_t run_state_get_u64(const unsigned char* p);

// What identifies the training data a saved position points into: one line
// "# train_data file: PATH (BYTES bytes, mtime SEC.NSEC)" per file (the loader's files[nfiles]).
// The trainer appends them to the resolved config text (*text, malloc'd) that every model file
// holds.
void run_state_append_data_text(char** text, char* const* files, int nfiles);

// resume = 1: may a run with config `now` (and resolved config text `now_text`, with its data
// lines) on `nranks` ranks continue exactly from the checkpoint `what` whose saved config text is
// `saved`? Exactness needs the same training data (the file list above, by path, size and mtime,
// where the checkpoint has one), batch_size, seq_len, seed, shuffle and global batch (ranks x
// grad_accum: the ranks may change when the product does not); and every other key that changes
// the computation the same too, unless now->resume_change names it, and the keys the rules
// `fixed` call fixed always (resume_keys_compare: the accepted changes go into *changes, which may
// be NULL). 0, or -1 with err naming the key, the checkpoint's value and the new one.
int run_state_check_resume(const char* saved, const char* what, const Config* now,
                           const char* now_text, int nranks, ResumeFixedFn fixed,
                           ResumeChanges* changes, char* err, size_t errcap);

#endif
