// model/run/checkpoints.c: the training run's checkpoint pair (trainer.h): OUT/model_<step>.bin
// (model/checkpoint.h), then OUT/state_<step>.bin (common/run_state.h), composed from the
// optimizer's and the loader's own serialisations and the loop state (the byte layout is in
// docs/design.md); the rotation; and resume = 1.
#include "model/run/trainer.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/dist.h"
#include "common/util.h"
#include "model/checkpoint.h"

// A checkpoint counts only when both files exist and verify; then the rotation keeps the newest
// keep_last pairs. Under mpirun every rank calls it (the optimizer state is gathered to rank 0,
// which alone writes). 0, or -1 after reporting the failure (the previous checkpoints are intact).
int run_checkpoint_save(Trainer* t, long step) {
    char mp[1100], sp[1100], err[2048];
    ckpt_pair_paths(t->cfg.out_dir, step, mp, sp, sizeof(mp));
    t->ls.step = step;
    Optimizer full;
    const Optimizer* opt = dp_state_for_save(t->dp, &t->opt, &full, t->model.num_params);
    if (!opt) return 0; // under mpirun only rank 0 writes (the state was gathered to it)
    DataLoaderState pos = t->data_pos;
    if (t->have_train) dataloader_get_state(&t->train, &pos);
    RunStateWriter w; // sections: loop (run_state_create), data, optim, model (the pair's tie)
    int bad = ckpt_save_model(&t->model, mp, step, t->config_text, err, sizeof(err)) ||
              run_state_create(&w, sp, 3, &t->ls, err, sizeof(err));
    if (!bad) {
        dataloader_state_put(&pos, &w);
        optim_state_put(opt, &w);
        run_state_put_pair(&w, step, run_state_params_crc(t->model.params, t->model.num_params));
        bad = run_state_finish(&w, err, sizeof(err));
    }
    dp_state_done(t->dp, &full);
    if (bad) {
        fprintf(stderr,
                "attnlab: checkpoint at step %ld failed: %s (previous checkpoints are intact)\n",
                step, err);
        return -1;
    }
    ckpt_prune(t->cfg.out_dir, t->cfg.keep_last);
    return 0;
}

// resume = 1: load the newest step whose model and state both verify, after checking that the
// run may continue from it exactly (ckpt_check_resume: keys not named in resume_change as saved)
// and that the two files are one checkpoint (run_state_check_pair). The start step (0 when there
// is nothing to resume), or -1 when that checkpoint already ends the run. Every rank loads the
// files; a failure is agreed on and reported once (exit 2). The config text gets the accepted
// changes (and those of earlier resumes) for config.conf and later model files.
long run_checkpoint_resume(Trainer* t) {
    const Config* c = &t->cfg;
    const long latest = ckpt_resume_step(c->out_dir, c->resume, c->max_steps);
    if (latest < 0) return latest == -1 ? 0 : -1;
    char mp[1100], sp[1100], err[2048] = "", msg[2100];
    ckpt_pair_paths(c->out_dir, latest, mp, sp, sizeof(mp));
    long s;
    Optimizer full; // zero = 1: the file holds the full state; this rank keeps its shard
    if (dp_sharded(t->dp)) optim_init(&full, t->opt.def, t->model.num_params);
    Optimizer* into = dp_sharded(t->dp) ? &full : &t->opt;
    static const char* const SECTIONS[] = {DATALOADER_STATE_SECTION, OPTIM_STATE_SECTION};
    RunStateReader r;
    char* saved = NULL;
    int bad = ckpt_check_resume(mp, c, t->config_text, dp_size(t->dp), &t->changes, &saved, err,
                                sizeof(err)) ||
              ckpt_load_model(&t->model, mp, 1, &s, NULL, 0, err, sizeof(err)) ||
              run_state_open(&r, sp, SECTIONS, 2, err, sizeof(err));
    if (!bad) {
        t->ls = r.loop;
        bad = run_state_check_pair(&r, mp, s,
                                   run_state_params_crc(t->model.params, t->model.num_params), err,
                                   sizeof(err)) ||
              optim_state_get(into, &r, err, sizeof(err)) ||
              dataloader_state_get(&t->data_pos, &r, err, sizeof(err));
        run_state_close(&r);
        bad = bad ||
              (t->have_train && dataloader_set_state(&t->train, &t->data_pos, err, sizeof(err)));
    }
    snprintf(msg, sizeof(msg), "cannot resume: %s", err);
    dist_exit_if_failed(bad, EXIT_USAGE, msg);
    if (dp_sharded(t->dp)) {
        dp_take_shard(t->dp, &full, &t->opt);
        optim_free(&full);
    }
    printf("resuming from step %ld (%s)\n", t->ls.step, mp);
    t->resumed = 1;
    resume_changes_append_text(&t->config_text, saved, t->ls.step, &t->changes);
    t->lr_was = lr_schedule_saved(saved, t->ls.step); // for the record (model/run/header.h)
    free(saved);
    return t->ls.step;
}
