# scripts/ablate_slurm.sh: the Slurm backend of scripts/ablate, sourced by it after the sweep
# is parsed and, unless --dry-run, every OUT/<run>/run.conf written; it uses the runner's functions
# and variables (run_state_r, run_one, post_eval, export_run, try_reuse, ...) and exits.
#   scripts/ablate SWEEP --slurm [...]   submit the runs not yet done as one job array (task i =
#                                        run i of the sweep) and a report job with afterany on
#                                        the array; with --dry-run print both scripts instead
#   --slurm-task                         inside array task i: train, evaluate and export run i
#                                        as the local runner does
#   --slurm-report                       inside the report job: build the report
# Time limits: the tasks ask for SIGUSR1 to their batch shell 120 s before the limit
# (--signal=B:USR1@120). On it the task stops its trainer with SIGTERM (the trainer writes a
# checkpoint after the step it is in and exits), records the run as stopped (exit 143, resumed
# like any interrupted run) and requeues itself (scontrol requeue): the requeued task resumes
# from that checkpoint (the runner always passes resume=1). A task that Slurm ends without the
# warning (SIGTERM alone: scancel, or a limit too short for the warning) is recorded as failed
# with exit 124; --retry-failed submits it again.
# The scripts: every value in an #SBATCH line is double-quoted with \, " and # escaped (Slurm
# reads the #SBATCH lines with that quoting) and every word of a command line is shell-quoted
# (printf %q); a sweep name, sweep directory or submit directory holding a control character
# (newline, ...) or '%' (Slurm's file name patterns, %j) is refused.

slurm_lead=120 # seconds of warning before the time limit

# ---- inside a job ---------------------------------------------------------------------------
slurm_requeue=0 slurm_stopped=0 slurm_pid="" slurm_rc=0
slurm_on_usr1() {
    slurm_requeue=1
    echo "ablate: $(date -u +%FT%TZ) SIGUSR1: time limit near; checkpointing and requeueing"
    [ -n "$slurm_pid" ] && kill -TERM "$slurm_pid" 2>/dev/null
}
slurm_on_term() {
    slurm_stopped=1
    [ -n "$slurm_pid" ] && kill -TERM "$slurm_pid" 2>/dev/null
}

# train with run_one's command line, the trainer in the background so the traps run at once
slurm_train() { # CONF LOG INDEX -> $slurm_rc
    echo "==== $(date -u +%FT%TZ) $TRAIN include=$1 resume=1 (Slurm job ${SLURM_JOB_ID:-?}," \
        "restart ${SLURM_RESTART_COUNT:-0})" >>"$2"
    # warned before the trainer started: the limit leaves less than the warning's lead, so a
    # trainer started now would be cut off, and a requeued task would be warned at its start
    # again; the run is recorded failed (124), which --retry-failed submits again
    if [ $slurm_early_usr1 -eq 1 ] || [ $slurm_requeue -eq 1 ]; then
        echo "ablate: $(date -u +%FT%TZ) SIGUSR1 (the time limit is near) came before the trainer" \
            "started: the job's time leaves less than ${slurm_lead} s; not trained, recorded failed" \
            "(exit 124); give --time more than $((slurm_lead / 60)) minutes plus one checkpoint" \
            "interval and submit again with --retry-failed" | tee -a "$2"
        slurm_requeue=0
        slurm_rc=124
        return
    fi
    "$TRAIN" "include=$1" resume=1 >>"$2" 2>&1 &
    slurm_pid=$!
    while kill -0 "$slurm_pid" 2>/dev/null; do wait "$slurm_pid"; done
    wait "$slurm_pid"
    slurm_rc=$?
    slurm_pid=""
    # ended by Slurm without the warning (the trainer's own exit code, 0 or 143, is that of a
    # stop; the run is marked failed so that it is not resubmitted unless asked)
    if [ $slurm_stopped -eq 1 ] && [ $slurm_requeue -eq 0 ]; then slurm_rc=124; fi
    # stopped for the requeue, not finished and not diverged: recorded as a run stopped by a
    # signal (143), which resumes, whatever code the trainer gives a stop
    if [ $slurm_requeue -eq 1 ] && [ "$slurm_rc" -ne 3 ] && [ ! -f "$(final_ckpt "$3")" ]; then
        slurm_rc=143
    fi
}

# after run_one recorded the exit: requeue a task stopped by the warning. 0 when requeued.
slurm_after() { # index rc
    [ $slurm_requeue -eq 1 ] && [ ! -f "$(final_ckpt "$1")" ] || return 1
    if scontrol requeue "${SLURM_JOB_ID:-}"; then
        echo "ablate: [$(($1 + 1))/$nruns] ${run_names[$1]}: stopped at the time limit; requeued (resume=1)"
        return 0
    fi
    echo "ablate: ${run_names[$1]}: scontrol requeue ${SLURM_JOB_ID:-} failed; rerun the sweep to resume" >&2
    return 1
}

if [ "$slurm_role" = task ]; then
    i=${SLURM_ARRAY_TASK_ID:-}
    [[ "$i" =~ ^[0-9]+$ ]] && [ "$i" -lt "$nruns" ] ||
        die "--slurm-task: SLURM_ARRAY_TASK_ID = '$i' is not a run index below $nruns"
    [ -f "$out/${run_names[$i]}/run.conf" ] || die "--slurm-task: $out/${run_names[$i]}/run.conf missing"
    trap slurm_on_usr1 USR1
    trap slurm_on_term TERM
    retry=1 run_state_r "$i"
    if [ "$REPLY" = done ]; then
        post_eval "$i"
        export_run "$i"
        exit 0
    fi
    run_one "$i"
    [ $slurm_requeue -eq 1 ] && exit 0
    [ "$(status_get "$out/${run_names[$i]}/ablate_status.json" exit)" = 0 ]
    exit $?
fi
if [ "$slurm_role" = report ]; then
    rc=0
    "$PY" "$here/ablate_report.py" "$out" || { echo "ablate: the report failed" >&2; rc=1; }
    # the exports of the tasks each rebuilt the committed directory's report as they finished
    if [ -n "${aset[results]:-}" ] && [ -d "${aset[results]}" ]; then
        "$PY" "$here/ablate_report.py" "${aset[results]}" >/dev/null || rc=1
    fi
    exit $rc
fi

# ---- submitting -----------------------------------------------------------------------------
command -v sbatch >/dev/null 2>&1 || [ $dry -eq 1 ] || die "--slurm: sbatch not found (is this a Slurm login node?)"
# a task of an earlier submission still queued or running (OUT/<run>/slurm_job, squeue)
queued() { # index
    local f="$out/${run_names[$1]}/slurm_job" id
    [ -f "$f" ] || return 1
    id=$(cat "$f")
    [ -n "$(squeue -h -j "$id" -o %T 2>/dev/null)" ]
}

[ $dry -eq 1 ] || [ $report_only -eq 1 ] || prepare_data
todo=()
for i in "${!run_names[@]}"; do
    if ! in_part "$i"; then
        [ $dry -eq 0 ] && run_state_r "$i" && [ "$REPLY" = todo ] && try_committed "$i" >/dev/null 2>&1
        continue
    fi
    [ $report_only -eq 0 ] || continue
    run_state_r "$i"
    case "$REPLY" in
    done) [ $dry -eq 0 ] && { post_eval "$i"; export_run "$i"; }; continue ;;
    failed) echo "ablate: [$((i + 1))/$nruns] ${run_names[$i]}: failed before, skipped (--retry-failed resubmits it)"; continue ;;
    esac
    if queued "$i"; then
        echo "ablate: [$((i + 1))/$nruns] ${run_names[$i]}: already queued as Slurm job $(cat "$out/${run_names[$i]}/slurm_job")"
        continue
    fi
    if [ $dry -eq 1 ]; then
        [ -n "${aset[results]:-}" ] && [ -f "${aset[results]}/${run_names[$i]}/provenance.json" ] &&
            continue
    else
        if try_reuse "$i"; then post_eval "$i"; export_run "$i"; continue; fi
        if try_committed "$i"; then continue; fi
    fi
    todo+=("$i")
done

# sb_q VALUE: VALUE for an #SBATCH line, double-quoted with \, " and # escaped by a backslash
sb_q() { local v=${1//\\/\\\\}; v=${v//\"/\\\"}; printf '"%s"' "${v//#/\\#}"; }
sbatch_opts() { # the options every job of the sweep gets
    printf '#SBATCH --chdir=%s\n' "$(sb_q "$PWD")"
    [ -n "$sb_partition" ] && printf '#SBATCH --partition=%s\n' "$(sb_q "$sb_partition")"
    [ -n "$sb_time" ] && printf '#SBATCH --time=%s\n' "$(sb_q "$sb_time")"
    [ -n "$sb_cpus" ] && printf '#SBATCH --cpus-per-task=%s\n' "$sb_cpus"
    return 0
}
q() { printf '%q' "$1"; }
dirty_opt=""
[ $allow_dirty -eq 0 ] || dirty_opt=" --allow-dirty"
array_script() {
    local list
    list=$(IFS=,; echo "${todo[*]}")
    printf '#!/bin/bash\n'
    printf '# generated by %s: one task per run not yet done (task i = run i of the sweep)\n' "$cmdline"
    printf '#SBATCH --job-name=%s\n' "$(sb_q "ablate-$sweep_name")"
    printf '#SBATCH --array=%s\n' "$list"
    printf '#SBATCH --output=%s\n' "$(sb_q "$out/slurm/task_%A_%a.out")"
    printf '#SBATCH --open-mode=append\n'
    printf '#SBATCH --requeue\n'
    printf '#SBATCH --signal=B:USR1@%d\n' "$slurm_lead"
    sbatch_opts
    printf 'exec %s %s --slurm-task --out %s --bin %s%s\n' "$(q "$here/ablate")" "$(q "$sweep_abs")" \
        "$(q "$out")" "$(q "$bindir")" "$dirty_opt"
}
report_script() {
    printf '#!/bin/bash\n'
    printf '# generated by %s: the report, after every task (afterany on the array)\n' "$cmdline"
    printf '#SBATCH --job-name=%s\n' "$(sb_q "ablate-$sweep_name-report")"
    printf '#SBATCH --output=%s\n' "$(sb_q "$out/slurm/report_%j.out")"
    [ -n "$sb_partition" ] && printf '#SBATCH --partition=%s\n' "$(sb_q "$sb_partition")"
    printf '#SBATCH --chdir=%s\n' "$(sb_q "$PWD")"
    printf 'exec %s %s --slurm-report --out %s --bin %s\n' "$(q "$here/ablate")" "$(q "$sweep_abs")" \
        "$(q "$out")" "$(q "$bindir")"
}

if [ $dry -eq 1 ]; then
    echo "sweep $sweep: $nruns runs into $out; ${#todo[@]} to submit to Slurm"
    if [ ${#todo[@]} -gt 0 ]; then
        echo "---- job array (sbatch)"
        array_script
    fi
    echo "---- report job (sbatch --dependency=afterany:<array job id>)"
    report_script
    exit 0
fi

mkdir -p "$out/slurm" || die "cannot create $out/slurm"
dep=()
if [ ${#todo[@]} -gt 0 ]; then
    array_script >"$out/slurm/array.sbatch" || die "cannot write $out/slurm/array.sbatch"
    jid=$(sbatch --parsable "$out/slurm/array.sbatch") || die "sbatch of the job array failed"
    jid=${jid%%;*}
    for i in "${todo[@]}"; do echo "${jid}_$i" >"$out/${run_names[$i]}/slurm_job"; done
    echo "ablate: submitted ${#todo[@]} runs of $sweep as Slurm job array $jid (logs: $out/slurm/)"
    dep=(--dependency="afterany:$jid")
fi
report_script >"$out/slurm/report.sbatch" || die "cannot write $out/slurm/report.sbatch"
rid=$(sbatch --parsable "${dep[@]+"${dep[@]}"}" "$out/slurm/report.sbatch") ||
    die "sbatch of the report job failed"
echo "ablate: report job ${rid%%;*} writes $out/results.csv when the tasks have ended"
exit 0
