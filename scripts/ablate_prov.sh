# scripts/ablate_prov.sh: the provenance of scripts/ablate's runs, sourced by it after the sweep
# is parsed (it uses the runner's variables and functions): the commit, the sha256 of the sweep
# file and of every config it includes, whether the commit holds them, and the refusal of a
# sweep that is not committed without --allow-dirty. Reads only (git, sha256sum).

# ---- provenance: the commit the runs are trained at, and whether it holds what they read ----
# Recorded in each run's ablate_status.json: commit; sweep_file, sweep_sha256 and config_sha256
# (every config the sweep file includes, recursively); sweep_dirty (the sweep file or one of
# those configs is untracked, modified or outside the repository); allow_dirty (--allow-dirty);
# commit_dirty (sweep_dirty, or a tracked file the runs depend on differs from the commit: C
# sources, the Makefile, the runner and export scripts).
commit=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)
root_real=$(realpath -- "$root")
conf_includes() { # FILE DEPTH: every file FILE includes, recursively, one real path a line
    local file=$1 dir l v
    [ "$2" -le 16 ] || return 0
    dir=$(dirname "$file")
    while IFS= read -r l || [ -n "$l" ]; do
        [[ "$l" =~ ^[[:space:]]*include[[:space:]]*=(.*)$ ]] || continue
        clean "${BASH_REMATCH[1]}"
        v=$REPLY
        [[ "$v" == /* ]] || v="$dir/$v"
        [ -f "$v" ] || continue
        v=$(realpath -- "$v")
        printf '%s\n' "$v"
        conf_includes "$v" $(($2 + 1))
    done <"$file"
}
rel_of() { # real path -> the path inside the repository, or 1 when outside
    case "$1" in "$root_real"/*) REPLY=${1#"$root_real"/} ;; *) REPLY=$1; return 1 ;; esac
}
dep_state() { # real path -> committed | modified | untracked | outside the repository
    rel_of "$1" || { echo "outside the repository"; return; }
    [ "$commit" != unknown ] || { echo "untracked (no git commit at $root)"; return; }
    git --literal-pathspecs -C "$root" ls-files --error-unmatch -- "$REPLY" >/dev/null 2>&1 ||
        { echo untracked; return; }
    git --literal-pathspecs -C "$root" diff --quiet HEAD -- "$REPLY" 2>/dev/null ||
        { echo modified; return; }
    echo committed
}
sweep_real=$(realpath -- "$sweep_abs")
declare -A dep_seen=()
dep_files=("$sweep_real")
while IFS= read -r f; do
    [ -n "$f" ] && [ -z "${dep_seen["x$f"]:-}" ] && [ "$f" != "$sweep_real" ] || continue
    dep_seen["x$f"]=1
    dep_files+=("$f")
done < <(conf_includes "$sweep_real" 0)
sweep_dirty=false dirty_why="" config_json="" dep_rels=()
for f in "${dep_files[@]}"; do
    st=$(dep_state "$f")
    rel_of "$f" && dep_rels+=(":(literal)$REPLY")
    shown=$REPLY
    [ "$st" = committed ] || { sweep_dirty=true; dirty_why+="${dirty_why:+; }$shown: $st"; }
    sha=$(sha256sum <"$f") || die "$f: cannot read it"
    sha=${sha%% *}
    if [ "$f" = "$sweep_real" ]; then sweep_file=$shown sweep_sha=$sha; else
        config_json+="${config_json:+, }\"$(json_esc "$shown")\": \"$sha\""; fi
done
commit_dirty=$sweep_dirty
if [ "$commit" = unknown ] || [ -n "$(git -C "$root" status --porcelain --untracked-files=no -- \
    '*.c' '*.h' Makefile 'scripts/ablate*' scripts/results_export scripts/score_sinks \
    "${dep_rels[@]+"${dep_rels[@]}"}" 2>/dev/null)" ]; then commit_dirty=true; fi
allow_json=false
[ $allow_dirty -eq 0 ] || allow_json=true
# the fields every ablate_status.json of this invocation ends with
prov_json=$(printf ', "sweep_file": "%s", "sweep_sha256": "%s", "config_sha256": {%s}, "sweep_dirty": %s, "allow_dirty": %s' \
    "$(json_esc "$sweep_file")" "$sweep_sha" "$config_json" "$sweep_dirty" "$allow_json")
dirty_msg="$sweep is not committed ($dirty_why): commit it, and the configs it includes, so that the recorded commit holds what the runs read, or pass --allow-dirty (each run's ablate_status.json then records \"sweep_dirty\": true, \"allow_dirty\": true)"
if [ "$sweep_dirty" = true ] && [ $allow_dirty -eq 0 ] && [ $dry -eq 0 ] && [ $report_only -eq 0 ] &&
    [ "$slurm_role" != report ]; then
    die "$dirty_msg"
fi
