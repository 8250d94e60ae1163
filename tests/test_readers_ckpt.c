// tests/test_readers_ckpt.c: the model-file readers through the built tools, with crafted bad
// files. Every case checks the exit code (2: bad input) and that the message names the file and
// what is wrong in it.
//   - attnlab model files (./evaluate, ./generate, ./export): missing, an llm.c magic, a foreign
//     magic, a future version, a corrupted header, a config text past the end of the file, a
//     saved config that does not parse, a corrupted tensor table, a tensor count and a tensor
//     name that differ from the saved config's model; a checksum mismatch. The trailer of a
//     crafted file is recomputed (zlib crc32), so each case reaches the check it is about.
//   - init_from = an attnlab file with another attention (./train): tensors matched by name, the
//     missing ones listed, training runs.
//   - run-state files (./train resume = 1): a foreign magic, another optimizer, a truncated
//     optim section (tests/test_run_state.c checks every refusal in-process).
//   - llm.c model files (./export, ./train init_from = llmc:): missing, truncated header, an
//     attnlab file, version, implausible and inconsistent sizes, a size that does not match.
//   - stale temporary files of a crashed checkpoint write are removed, live ones kept.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/reader_util.h"
#include "tests/testutil.h"

static char g_run[600]; // a trained tiny run (softmax)
static char g_model[800];

static void setup(void) {
    if (g_run[0]) return;
    snprintf(g_run, sizeof(g_run), "%s", rd_train_tiny(""));
    snprintf(g_model, sizeof(g_model), "%s/model_00000002.bin", g_run);
}

// Header field i (int32) of a model-file image.
static int32_t* field(unsigned char* b, int i) {
    return (int32_t*)(void*)(b + 4 * i);
}

// offset of the config text: header 1024, attention 256, the tensor table
static size_t text_off(unsigned char* b) {
    return 1024 + 256 + (size_t)*field(b, 10) * 72;
}

// A copy of the trained model file, changed by `edit`, trailer recomputed, at DIR/name.
static const char* crafted(const char* name, void (*edit)(unsigned char*, size_t*)) {
    static char p[900];
    size_t n;
    unsigned char* b = rd_slurp(g_model, &n);
    edit(b, &n);
    rd_fix_trailer(b, n);
    snprintf(p, sizeof(p), "%s/%s", g_run, name);
    rd_write(p, b, n);
    free(b);
    return p;
}

// A copy of the trained model file with header word i set to v (trailer recomputed), at DIR/name.
static int g_word, g_value;
static void ed_word(unsigned char* b, size_t* n) {
    (void)n;
    *field(b, g_word) = g_value;
}
static const char* crafted_word(const char* name, int i, int32_t v) {
    g_word = i, g_value = v;
    return crafted(name, ed_word);
}
static void ed_badconfig(unsigned char* b, size_t* n) {
    (void)n;
    size_t o = text_off(b), len = (size_t)*field(b, 16);
    memset(b + o, ' ', len);
    memcpy(b + o, "n_layer = banana\n", 17);
}
static void ed_table(unsigned char* b, size_t* n) {
    (void)n;
    int64_t bad = -5;
    memcpy(b + 1024 + 256 + 64, &bad, 8); // size of tensor 0
}
static void ed_name(unsigned char* b, size_t* n) {
    (void)n;
    memcpy(b + 1024 + 256, "wtf", 4); // tensor 0 is wte
}
// the saved attention and config become gated (more tensors than the file's table)
static void ed_gated(unsigned char* b, size_t* n) {
    (void)n;
    memset(b + 1024, 0, 256);
    memcpy(b + 1024, "gated", 5);
    size_t o = text_off(b), len = (size_t)*field(b, 16);
    char* t = (char*)b + o;
    for (size_t i = 0; i + 11 <= len; i++)
        if (memcmp(t + i, "\nattention ", 11) == 0) {
            char* v = memchr(t + i + 1, '\n', len - i - 1);
            char* sm = strstr(t + i, "softmax");
            ck_assert_msg(v && sm && sm < v, "the saved attention line is not softmax");
            memcpy(sm, "gated  ", 7);
            return;
        }
    ck_abort_msg("no attention line in the saved config");
}

START_TEST(test_model_file_errors) {
    setup();
    char args[8192];
    const char* dir = g_run;
    snprintf(args, sizeof(args), "--checkpoint %s/missing.bin --data x", dir);
    RD_EXPECT(2, "evaluate", args, "missing.bin: cannot open");
    const char* p = crafted_word("llmc_magic.bin", 0, 20240326);
    snprintf(args, sizeof(args), "--checkpoint %s --data x", p);
    // a tool opens a file with llm.c's magic as an llm.c file: this one's header is cut short
    RD_EXPECT(2, "evaluate", args, "llmc_magic.bin: llm.c model version");
    p = crafted_word("magic.bin", 0, 12345);
    snprintf(args, sizeof(args), "--checkpoint %s --data x", p);
    RD_EXPECT(2, "evaluate", args, "magic.bin: not an attnlab model file (magic 12345");
    p = crafted_word("version.bin", 1, 7);
    snprintf(args, sizeof(args), "--checkpoint %s --format hf --out %s/o1", p, dir);
    RD_EXPECT(2, "export", args, "version.bin: unsupported version 7");
    p = crafted_word("nspecs.bin", 10, 1000);
    snprintf(args, sizeof(args), "--checkpoint %s --data x", p);
    RD_EXPECT(2, "evaluate", args, "nspecs.bin: corrupted header");
    p = crafted_word("textlen.bin", 16, 1 << 23);
    snprintf(args, sizeof(args), "--checkpoint %s --n 1 --tokens 2", p);
    RD_EXPECT(2, "generate", args, "textlen.bin: truncated while reading the config text");
    p = crafted("badconfig.bin", ed_badconfig);
    snprintf(args, sizeof(args), "--checkpoint %s --n 1 --tokens 2", p);
    RD_EXPECT(2, "generate", args, "badconfig.bin: its saved config does not parse", "n_layer");
    p = crafted("table.bin", ed_table);
    snprintf(args, sizeof(args), "--checkpoint %s --n 1 --tokens 2", p);
    RD_EXPECT(2, "generate", args, "table.bin: corrupted tensor table");
    p = crafted("name.bin", ed_name);
    snprintf(args, sizeof(args), "--checkpoint %s --data x", p);
    RD_EXPECT(2, "evaluate", args, "name.bin: tensor 0 is wtf[", "the model expects wte[");
    p = crafted("gated.bin", ed_gated);
    snprintf(args, sizeof(args), "--checkpoint %s --format hf --out %s/o2", p, dir);
    RD_EXPECT(2, "export", args, "gated.bin: has ", " tensors, the model has ");
    // one flipped parameter byte, trailer left as it was
    size_t n;
    unsigned char* b = rd_slurp(g_model, &n);
    b[n - 100] ^= 0x40;
    char q[900];
    snprintf(q, sizeof(q), "%s/flipped.bin", dir);
    rd_write(q, b, n);
    free(b);
    snprintf(args, sizeof(args), "--checkpoint %s --data x", q);
    RD_EXPECT(2, "evaluate", args, "flipped.bin: checksum mismatch");
}
END_TEST

// init_from = a softmax checkpoint into a gated model: the shared tensors load by name, the
// gate tensors are listed as not in the file, and the run trains
START_TEST(test_init_from_other_attention) {
    setup();
    char extra[1200];
    snprintf(extra, sizeof(extra), "attention=gated init_from=%s", g_model);
    const char* run = rd_train_tiny(extra);
    char p[800];
    snprintf(p, sizeof(p), "%s/model_00000002.bin", run);
    ck_assert_msg(access(p, R_OK) == 0, "%s missing", p);
    // the trainer's log names the tensors that kept their init
    snprintf(p, sizeof(p), "%s", run);
    char args[8192], out[1 << 14];
    snprintf(args, sizeof(args),
             "n_layer=2 n_head=2 n_embd=16 block_size=16 seq_len=16 batch_size=2 vocab_size=257 "
             "tokenizer=byte threads=1 eval_every=0 sample_every=0 warmup_steps=0 max_steps=1 "
             "train_data='%s/data/train_*.bin' out_dir=%s/again attention=gated init_from=%s",
             run, run, g_model);
    int rc = rd_run("train", args, out, sizeof(out));
    ck_assert_msg(rc == 0, "train: exit %d\n%s", rc, out);
    ck_assert_msg(strstr(out, g_model) && strstr(out, "gated.w") && strstr(out, "gated.b"),
                  "the init_from note does not list the gate tensors:\n%.3000s", out);
}
END_TEST

// resume = 1 over a run directory whose state file is replaced
static void resume_case(const char* name, void (*edit)(unsigned char*, size_t*), const char* opt,
                        const char* want1, const char* want2) {
    setup();
    char cmd[8192];
    snprintf(cmd, sizeof(cmd),
             "rm -rf %s/%s && mkdir -p %s/%s && cp %s %s/%s/ && cp %s/state_00000002.bin %s/%s/",
             g_run, name, g_run, name, g_model, g_run, name, g_run, g_run, name);
    ck_assert_int_eq(system(cmd), 0);
    char sp[900];
    snprintf(sp, sizeof(sp), "%s/%s/state_00000002.bin", g_run, name);
    size_t n;
    unsigned char* b = rd_slurp(sp, &n);
    edit(b, &n);
    rd_fix_trailer(b, n);
    rd_write(sp, b, n);
    free(b);
    char args[8192];
    snprintf(args, sizeof(args),
             "n_layer=2 n_head=2 n_embd=16 block_size=16 seq_len=16 batch_size=2 vocab_size=257 "
             "tokenizer=byte threads=1 eval_every=0 sample_every=0 warmup_steps=0 max_steps=4 "
             "resume=1 resume_change=val_data,max_steps %s "
             "train_data='%s/data/train_*.bin' out_dir=%s/%s",
             opt, g_run, g_run, name);
    RD_EXPECT(2, "train", args, "cannot resume", "state_00000002.bin", want1, want2);
}

static void ed_state_magic(unsigned char* b, size_t* n) {
    (void)n;
    *field(b, 0) = 777;
}
static void ed_none(unsigned char* b, size_t* n) {
    (void)b;
    (void)n;
}
static void ed_cut(unsigned char* b, size_t* n) {
    (void)b;
    *n -= 64; // the trailer is rewritten over the new end: the optim section (the last) is short
}

START_TEST(test_state_file_errors) {
    resume_case("st_magic", ed_state_magic, "", "not an attnlab run-state file (magic 777", "");
    resume_case("st_opt", ed_none, "optimizer=sgd", "optimizer state is adamw", "the run uses sgd");
    resume_case("st_cut", ed_cut, "", "section 'optim'", "runs past the end of the file");
}
END_TEST

static char g_llmc[900];

static void llmc_setup(void) {
    setup();
    if (g_llmc[0]) return;
    snprintf(g_llmc, sizeof(g_llmc), "%s/tiny.llmc.bin", g_run);
    char args[8192];
    snprintf(args, sizeof(args), "--checkpoint %s --format llmc --out %s", g_model, g_llmc);
    RD_EXPECT(0, "export", args, "");
}

static const char* llmc_crafted(const char* name, int field_i, int32_t value, long cut) {
    static char p[900];
    size_t n;
    unsigned char* b = rd_slurp(g_llmc, &n);
    if (field_i >= 0) *field(b, field_i) = value;
    if (cut) n = (size_t)cut;
    snprintf(p, sizeof(p), "%s/%s", g_run, name);
    rd_write(p, b, n);
    free(b);
    return p;
}

START_TEST(test_llmc_file_errors) {
    llmc_setup();
    char args[8192];
    const char* p;
    // the exported file reads back
    snprintf(args, sizeof(args), "--checkpoint %s --format hf --no-tokenizer --out %s/hf_ok",
             g_llmc, g_run);
    RD_EXPECT(0, "export", args, "llm.c model");
    p = llmc_crafted("l_short.bin", -1, 0, 600);
    snprintf(args, sizeof(args), "--checkpoint %s --format hf --out %s/x", p, g_run);
    RD_EXPECT(2, "export", args, "l_short.bin: truncated header");
    p = llmc_crafted("l_version.bin", 1, 5, 0);
    snprintf(args, sizeof(args), "--checkpoint %s --format hf --out %s/x", p, g_run);
    RD_EXPECT(2, "export", args, "l_version.bin: llm.c model version 5 is not supported");
    p = llmc_crafted("l_field.bin", 4, 0, 0);
    snprintf(args, sizeof(args), "--checkpoint %s --format hf --out %s/x", p, g_run);
    RD_EXPECT(2, "export", args, "l_field.bin: implausible header value 0 at field 4");
    p = llmc_crafted("l_vp.bin", 7, 100, 0); // padded vocab 100 < vocab 257
    snprintf(args, sizeof(args), "--checkpoint %s --format hf --out %s/x", p, g_run);
    RD_EXPECT(2, "export", args, "l_vp.bin: inconsistent sizes (V=257 Vp=100");
    p = llmc_crafted("l_size.bin", -1, 0, 4000);
    snprintf(args, sizeof(args), "--checkpoint %s --format hf --out %s/x", p, g_run);
    RD_EXPECT(2, "export", args, "l_size.bin: size 4000 bytes, expected");
    // through ./train init_from = llmc:
    const char* base = "n_layer=2 n_head=2 n_embd=16 block_size=16 seq_len=16 batch_size=2 "
                       "vocab_size=257 tokenizer=byte threads=1 eval_every=0 sample_every=0 "
                       "max_steps=1 warmup_steps=0";
    snprintf(args, sizeof(args),
             "%s train_data='%s/data/train_*.bin' out_dir=%s/li init_from=llmc:%s/nothere.bin",
             base, g_run, g_run, g_run);
    RD_EXPECT(2, "train", args, "nothere.bin: cannot open");
    snprintf(args, sizeof(args),
             "%s train_data='%s/data/train_*.bin' out_dir=%s/li init_from=llmc:%s", base, g_run,
             g_run, g_model);
    RD_EXPECT(2, "train", args, "model_00000002.bin: not an llm.c model file (magic 20261130");
}
END_TEST

// model_N.bin.tmp.PID of a process that is gone is removed at the next checkpoint; one of a
// running process (this test) is kept
START_TEST(test_stale_temp_files_removed) {
    setup();
    pid_t child = fork();
    ck_assert(child >= 0);
    if (child == 0) _exit(0);
    waitpid(child, NULL, 0);
    char out_dir[800], dead[1000], live[1000], cmd[8192];
    snprintf(out_dir, sizeof(out_dir), "%s/stale", g_run);
    snprintf(dead, sizeof(dead), "%s/model_00000001.bin.tmp.%ld", out_dir, (long)child);
    snprintf(live, sizeof(live), "%s/state_00000001.bin.tmp.%ld", out_dir, (long)getpid());
    snprintf(cmd, sizeof(cmd), "mkdir -p %s && touch %s %s", out_dir, dead, live);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert(kill(child, 0) != 0); // the child is gone (not recycled yet)
    char args[8192];
    snprintf(args, sizeof(args),
             "n_layer=2 n_head=2 n_embd=16 block_size=16 seq_len=16 batch_size=2 vocab_size=257 "
             "tokenizer=byte threads=1 eval_every=0 sample_every=0 warmup_steps=0 max_steps=2 "
             "checkpoint_every=2 "
             "train_data='%s/data/train_*.bin' out_dir=%s",
             g_run, out_dir);
    RD_EXPECT(0, "train", args, "");
    ck_assert_msg(access(dead, F_OK) != 0, "%s (dead writer) was not removed", dead);
    ck_assert_msg(access(live, F_OK) == 0, "%s (live writer) was removed", live);
}
END_TEST

static Suite* readers_ckpt_suite(void) {
    Suite* s = suite_create("readers_ckpt");
    TCase* tc = tcase_create("ckpt");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_model_file_errors);
    tcase_add_test(tc, test_init_from_other_attention);
    tcase_add_test(tc, test_state_file_errors);
    tcase_add_test(tc, test_llmc_file_errors);
    tcase_add_test(tc, test_stale_temp_files_removed);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(readers_ckpt_suite)
