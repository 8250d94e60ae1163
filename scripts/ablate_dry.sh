# scripts/ablate_dry.sh: --dry-run of scripts/ablate, sourced by it after the sweep is parsed (it
# uses the runner's variables and functions). Prints the runs with their state, part and
# settings, the data the sweep prepares before its first run, whether the sweep file is
# committed, and per part an estimated training time (scripts/ablate_plan.py estimate: measured
# step times, ablate.step_ms, else the step-time model). Writes nothing: no sweep directory, no
# run.conf, no record; only files are read and ./bench measures the matmul peak when the model
# needs it.

echo "sweep $sweep: $nruns runs into $out"
dry_left=() # 1 for each run still to train
for i in "${!run_names[@]}"; do
    pt=""
    [ "$nparts" -gt 0 ] && pt="part ${group_part[${run_group[$i]}]}/$nparts"
    run_state_r "$i"
    st=$REPLY
    if [ "$st" = todo ] && [ -n "${aset[results]:-}" ] &&
        [ -f "${aset[results]}/${run_names[$i]}/provenance.json" ]; then
        st=committed
    fi
    if [ "$st" = todo ]; then dry_left+=(1); else dry_left+=(0); fi
    printf '  %-50s %-9s %-10s %s\n' "${run_names[$i]}" "$st" "$pt" "${run_settings[$i]//$'\n'/ }"
done
echo "each run: $TRAIN include=$out/<run>/run.conf resume=1"
[ -n "$probe_task" ] && echo "after each run: $PROBE eval $probe_task --data $probe_data"
[ -n "$long_ctx" ] && echo "after each run: $EVALUATE --lengths $long_ctx"
if [ "$sweep_dirty" = true ]; then
    if [ $allow_dirty -eq 1 ]; then
        echo "not committed ($dirty_why): trained with --allow-dirty, recorded in ablate_status.json"
    else
        echo "not committed ($dirty_why): a run without --dry-run stops here unless --allow-dirty"
    fi
fi

# The data the sweep prepares before its first run (prepare_data): the probe task's shards,
# then ablate.setup when no file matches train_data (that of the first run).
dry_td=$(conf_get "$sweep_abs" train_data)
setting_of "${run_settings[0]}" train_data && dry_td=$REPLY
dry_gen=0
if [ -n "$probe_task" ] && [ ! -f "$probe_data/${probe_task}_val_000000.bin" ]; then
    dry_gen=1
    echo "first: $PROBE gen $probe_task --out $probe_data${aset[probe_gen]:+ ${aset[probe_gen]}} (no $probe_data/${probe_task}_val_000000.bin yet)"
fi
if [ -n "${aset[stream_gen]:-}" ] && ! compgen -G "${aset[stream_data]}" >/dev/null; then
    echo "first: $PROBE gen $probe_task --out $(dirname "${aset[stream_data]}") ${aset[stream_gen]} (ablate.stream_gen: no file matches ablate.stream_data = ${aset[stream_data]} yet)"
fi
# shellcheck disable=SC2086
if [ -n "$dry_td" ] && compgen -G "$dry_td" >/dev/null; then
    echo "data: train_data = $dry_td matches $(compgen -G "$dry_td" | wc -l) files"
elif [ -n "${aset[setup]:-}" ]; then
    dry_setup=$(setup_with_bin "${aset[setup]}") || die "ablate.setup: cannot rewrite it for --bin $bindir"
    echo "first: ablate.setup (no file matches train_data = ${dry_td:-(unset)}): $dry_setup"
elif [ $dry_gen -eq 1 ]; then
    echo "data: train_data = $dry_td: made by the probe generation above, or missing"
else
    echo "data: no file matches train_data = ${dry_td:-(unset)} and the sweep has no ablate.setup: the runs will fail"
fi

# time per part: scripts/ablate_plan.py estimate, one line per part: PART, SECONDS, HOW
est=${aset[step_ms]:-}
[ -z "$est" ] || [[ "$est" =~ ^[0-9]+([.][0-9]+)?$ ]] ||
    die "$sweep: ablate.step_ms = '$est' is not a number of milliseconds"
np=$nparts
[ "$np" -gt 0 ] || np=1
declare -A dry_secs=() dry_how=()
while IFS=$'\t' read -r k secs how; do
    dry_secs[$k]=$secs dry_how[$k]=$how
done < <(for i in "${!run_names[@]}"; do
    pk=1
    [ "$nparts" -gt 0 ] && pk=${group_part[${run_group[$i]}]}
    printf '%s\t%s\t%s\t%s\n' "$pk" "${dry_left[$i]}" "${run_names[$i]}" \
        "${run_settings[$i]//$'\n'/$'\x1f'}"
done | "$PY" "$here/ablate_plan.py" estimate "$TRAIN" "$sweep_abs" "$out" \
    --results "${aset[results]:-}" --step-ms "$est" --threads "${thr_note#threads=}" \
    --bench "$bindir/bench")
for k in $(seq 1 "$np"); do
    runs=0 left=0 seeds=""
    for i in "${!run_names[@]}"; do
        [ "$nparts" -gt 0 ] && [ "${group_part[${run_group[$i]}]}" -ne "$k" ] && continue
        runs=$((runs + 1))
        left=$((left + dry_left[i]))
        sd=${group_seeds[${run_group[$i]}]}
        [[ ",$seeds," == *",$sd,"* ]] || seeds+="${seeds:+,}$sd"
    done
    printf 'part %d/%d (seed %s): %d runs, %d to train, estimated %s of training (%s)\n' \
        "$k" "$np" "${seeds:-(not swept)}" "$runs" "$left" \
        "$(fmt_dur "$(awk -v t="${dry_secs[$k]:-0}" -v j="$jobs" 'BEGIN{printf "%d", t / j}')")" \
        "${dry_how[$k]:-the estimate failed}"
    [ "$nparts" -gt 0 ] &&
        echo "  run it: scripts/ablate $(printf '%q' "$sweep") --part $k/$np$bin_opt$([ "$jobs" -gt 1 ] && echo " --jobs $jobs"), then commit ${aset[results]:-the results directory}"
done
