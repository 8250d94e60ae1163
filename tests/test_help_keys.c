// tests/test_help_keys.c: no documented key refuses itself. Parses `./train --help` (the list of
// config keys with type, default and range or choices, generated from the table the parser uses)
// and, for every key it lists, trains a tiny model (1 layer, 2 steps, byte tokenizer) with the key
// set to a valid value other than its default: every other choice of a choice key, one value of
// each numeric or text key (VALUES below; a numeric key without an entry takes default + 1 or
// x 2 within its range, a text key without an entry fails the suite by name, so a new key must
// say what it is tested with). Every run must exit 0 and no output may say "not supported by this
// build" (the words a refused key used to print); precision = bf16 may instead be refused where
// oneDNN has no native bf16 (exit 2, naming the CPU's lack). A key listed twice in --help, or one
// whose line does not parse, fails too.
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/model_util.h"
#include "tests/testutil.h"

#define MAXKEYS 160

typedef struct {
    char key[64], type[8], def[64], range[160];
} HelpKey;

// Values for keys whose generic choice would not run or would not change anything; $DIR is the
// test's directory, $CKPT a checkpoint of the base run.
static const char* const VALUES[][2] = {
    {"n_layer", "2"},
    {"n_head", "4"},
    {"n_embd", "16"},
    {"block_size", "16"},
    {"vocab_size", "300"},
    {"init_from", "$CKPT"},
    {"attention", "ssmax"},
    {"train_data", "$DIR/data/train_0*.bin"},
    {"val_data", "$DIR/data/val_0*.bin"},
    {"tokenizer_dir", "$DIR/data"},
    {"batch_size", "3"},
    {"seq_len", "4"},
    {"max_steps", "3"},
    {"grad_accum", "2"},
    {"threads", "2"},
    {"seed", "7"},
    {"lr", "1e-3"},
    {"min_lr", "1e-4"},
    {"warmup_steps", "2"},
    {"weight_decay", "0.01"},
    {"z_loss", "1e-4"},
    {"beta1", "0.8"},
    {"beta2", "0.99"},
    {"eps", "1e-6"},
    {"grad_clip", "0.5"},
    {"out_dir", "$OUT"},
    {"log_every", "2"},
    {"eval_every", "2"},
    {"eval_steps", "2"},
    {"metrics_every", "2"},
    {"checkpoint_every", "1"},
    {"sample_every", "1"},
    {"sample_tokens", "4"},
    {"keep_last", "1"},
    {"dump_attention_every", "1"},
    {"probe_sequences", "3"},
    {"sink_eps", "0.2"},
    {"max_skips", "2"},
    {"eval_seq_len", "6"},
    {"dist_timeout", "60"},
    {"mc_data", "$DIR/mc.jsonl"},
    // the final decay's length belongs to the wsd schedule (refused with the others)
    {"decay_steps", "1 lr_schedule=wsd"},
    {"decay_fraction", "0.5 lr_schedule=wsd"},
    {"resume_change", "max_steps"}, // continues a copy of the base run with a larger max_steps
};
#define NVALUES ((int)(sizeof(VALUES) / sizeof(VALUES[0])))

// the base run: every key at a value the tiny model runs with
static const char* const BASE = "n_layer=1 n_head=2 n_embd=8 block_size=8 seq_len=8 batch_size=2 "
                                "vocab_size=257 tokenizer=byte max_steps=2 warmup_steps=1 "
                                "eval_every=1 eval_steps=1 metrics_every=1 probe_sequences=2 "
                                "threads=1 sample_every=0";

// Run BUILD/train with `args` (space-separated), stdout and stderr into `log`; the exit code.
static int run_train(const char* args, const char* log) {
    char bin[1200], buf[8192];
    snprintf(bin, sizeof(bin), "%s/train", test_build_dir());
    util_strlcpy(buf, args, sizeof(buf));
    char* argv[96];
    int argc = 0;
    argv[argc++] = bin;
    for (char* tok = strtok(buf, " "); tok && argc < 95; tok = strtok(NULL, " "))
        argv[argc++] = tok;
    argv[argc] = NULL;
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        setenv("OMP_NUM_THREADS", "1", 1);
        execv(bin, argv);
        _exit(127);
    }
    int st;
    ck_assert(waitpid(pid, &st, 0) == pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static char* slurp(const char* path) {
    char err[1200];
    size_t len;
    char* t = util_read_file(path, &len, err, sizeof(err));
    ck_assert_msg(t != NULL, "%s", err);
    return t;
}

// The keys of `./train --help`: lines "  KEY  TYPE  DEFAULT  RANGE" under "Config keys".
static int parse_help(HelpKey* keys, const char* dir) {
    char log[1100];
    snprintf(log, sizeof(log), "%s/help.txt", dir);
    ck_assert_int_eq(run_train("--help", log), 0);
    char* text = slurp(log);
    char* start = strstr(text, "Config keys");
    ck_assert_msg(start != NULL, "--help has no 'Config keys' section");
    int n = 0;
    for (char* line = strtok(start, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "  ", 2) != 0 || line[2] == ' ') continue; // headings, help text
        HelpKey k;
        int got = sscanf(line, " %63s %7s %63s %159[^\n]", k.key, k.type, k.def, k.range);
        ck_assert_msg(got == 4, "--help line does not parse: '%s'", line);
        ck_assert_msg(!strcmp(k.type, "int") || !strcmp(k.type, "float") || !strcmp(k.type, "str"),
                      "--help line: type '%s' of %s", k.type, k.key);
        for (int i = 0; i < n; i++)
            ck_assert_msg(strcmp(keys[i].key, k.key) != 0, "--help lists %s twice", k.key);
        ck_assert(n < MAXKEYS);
        keys[n++] = k;
    }
    free(text);
    return n;
}

static const char* special(const char* key) {
    for (int i = 0; i < NVALUES; i++)
        if (!strcmp(VALUES[i][0], key)) return VALUES[i][1];
    return NULL;
}

// $DIR, $OUT, $CKPT in v
static void expand(char* out, size_t cap, const char* v, const char* dir, const char* outdir,
                   const char* ckpt) {
    size_t n = 0;
    out[0] = '\0';
    while (*v && n + 1 < cap) {
        const char* rep = NULL;
        size_t skip = 0;
        if (!strncmp(v, "$DIR", 4)) rep = dir, skip = 4;
        if (!strncmp(v, "$OUT", 4)) rep = outdir, skip = 4;
        if (!strncmp(v, "$CKPT", 5)) rep = ckpt, skip = 5;
        if (rep) {
            n += (size_t)snprintf(out + n, cap - n, "%s", rep);
            v += skip;
        } else {
            out[n++] = *v++;
            out[n] = '\0';
        }
    }
}

// The values to try for key k (at most 16, each != its default)
static int values_for(const HelpKey* k, char vals[16][300], const char* dir, const char* outdir,
                      const char* ckpt) {
    const char* sp = special(k->key);
    int n = 0;
    if (sp) {
        expand(vals[n++], 300, sp, dir, outdir, ckpt);
    } else if (strchr(k->range, '|')) { // choices (0|1 included): every one but the default
        char buf[160];
        util_strlcpy(buf, k->range, sizeof(buf));
        for (char* w = strtok(buf, "|"); w && n < 16; w = strtok(NULL, "|"))
            if (strcmp(w, k->def) != 0) util_strlcpy(vals[n++], w, 300);
    } else if (k->range[0] == '[') { // a number in [lo, hi]
        double lo, hi, d = atof(k->def);
        ck_assert_msg(sscanf(k->range, "[%lf, %lf]", &lo, &hi) == 2, "%s: range '%s'", k->key,
                      k->range);
        double v = !strcmp(k->type, "int") ? d + 1 : d != 0 ? 2 * d : 0.5 * hi;
        if (v > hi) v = !strcmp(k->type, "int") ? d - 1 : 0.5 * d;
        ck_assert_msg(v >= lo && v <= hi && v != d, "%s: no value besides %s in %s", k->key, k->def,
                      k->range);
        snprintf(vals[n++], 300, "%.17g", v);
    } else {
        ck_abort_msg("key %s (%s, %s): give it a test value in VALUES (tests/test_help_keys.c)",
                     k->key, k->type, k->range);
    }
    for (int i = 0; i < n; i++)
        ck_assert_msg(strcmp(vals[i], k->def) != 0, "%s: the test value is its default", k->key);
    return n;
}

START_TEST(test_every_help_key_runs) {
    const char* dir = test_tmpdir();
    char cmd[1400], base_args[4096], ckpt[1300], out[1200], log[1200];
    test_write_shards(dir, 257, 61, 20000, 3000);
    snprintf(cmd, sizeof(cmd), "mkdir -p %s/data && mv %s/train_*.bin %s/val_*.bin %s/data", dir,
             dir, dir, dir);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(cmd, sizeof(cmd), "%s/mc.jsonl", dir); // two HellaSwag examples for mc_data
    FILE* mc = fopen(cmd, "w");
    ck_assert(mc != NULL);
    fputs("{\"ctx\": \"the cat\", \"endings\": [\" sat\", \" ran\"], \"label\": 0}\n"
          "{\"ctx\": \"a dog\", \"endings\": [\" barks\", \" flies\"], \"label\": 0}\n",
          mc);
    ck_assert(fclose(mc) == 0);
    snprintf(base_args, sizeof(base_args),
             "%s train_data=%s/data/train_*.bin val_data=%s/data/val_*.bin", BASE, dir, dir);
    // the base run (also the checkpoint init_from starts from, and the run resume = 1 continues)
    char args[16384];
    snprintf(out, sizeof(out), "%s/base", dir);
    snprintf(args, sizeof(args), "%s out_dir=%s", base_args, out);
    snprintf(log, sizeof(log), "%s/base.log", dir);
    ck_assert_msg(run_train(args, log) == 0, "the base run failed: %s", slurp(log));
    snprintf(ckpt, sizeof(ckpt), "%s/model_00000002.bin", out);
    HelpKey keys[MAXKEYS];
    const int nk = parse_help(keys, dir);
    ck_assert_int_ge(nk, 50);
    int runs = 0, failed = 0;
    char report[8192] = "";
    size_t rl = 0;
    for (int i = 0; i < nk; i++) {
        const HelpKey* k = &keys[i];
        char vals[16][300];
        snprintf(out, sizeof(out), "%s/k%03d", dir, i);
        const int nv = values_for(k, vals, dir, out, ckpt);
        for (int j = 0; j < nv; j++) {
            snprintf(out, sizeof(out), "%s/k%03d_%d", dir, i, j);
            if (!strcmp(k->key, "resume")) // continue the finished base run: nothing to do, exit 0
                snprintf(args, sizeof(args), "%s out_dir=%s/base resume=1", base_args, dir);
            else if (!strcmp(k->key, "resume_change")) { // extend a copy of the base run
                char cp[4096];
                snprintf(cp, sizeof(cp), "cp -r %s/base %s && rm -f %s/train.lock", dir, out, out);
                ck_assert_int_eq(system(cp), 0);
                snprintf(args, sizeof(args), "%s out_dir=%s resume=1 max_steps=3 %s=%s", base_args,
                         out, k->key, vals[j]);
            } else if (!strcmp(k->key, "out_dir"))
                snprintf(args, sizeof(args), "%s %s=%s", base_args, k->key, out);
            else
                snprintf(args, sizeof(args), "%s out_dir=%s %s=%s", base_args, out, k->key,
                         vals[j]);
            snprintf(log, sizeof(log), "%s/k%03d_%d.log", dir, i, j);
            const int rc = run_train(args, log);
            char* text = slurp(log);
            const int unsupported = strstr(text, "not supported by this build") != NULL;
            int ok = rc == 0 && !unsupported;
            if (!ok && !unsupported && rc == 2 && !strcmp(k->key, "precision") &&
                strncmp(vals[j], "bf16", 4) == 0 && strcmp(vals[j], "bf16_ref") != 0 &&
                !test_bf16_native("help_keys"))
                ok = 1; // refused where the CPU has no native bf16, as documented
            if (!ok) {
                failed++;
                rl += (size_t)snprintf(report + rl, sizeof(report) - rl,
                                       "  %s=%s: exit %d: %.300s\n", k->key, vals[j], rc, text);
                if (rl >= sizeof(report)) rl = sizeof(report) - 1;
            }
            free(text);
            runs++;
        }
    }
    fprintf(stderr, "help_keys: %d keys, %d runs\n", nk, runs);
    ck_assert_msg(failed == 0, "%d of %d runs with a key set from --help failed:\n%s", failed, runs,
                  report);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static Suite* help_keys_suite(void) {
    Suite* s = suite_create("help_keys");
    TCase* tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_every_help_key_runs);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(help_keys_suite)
