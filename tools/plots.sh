#!/usr/bin/env bash
# plots.sh: `make plots`, and the drawing half of `make report`. Runs every
# chapter's plotted experiments (chapters/NN-name/, found by folder), each
# into OUT/chapter-N/:
#
#   chapters/NN-name/plots.sh  when the chapter has one: sourced here, it
#                              runs its programs through plot_run and may draw
#                              a figure from the last `make bench` (BENCH_LOG)
#   otherwise                  `build/chapter-N --plot --out=OUT/chapter-N`,
#                              when the chapter has a plot.gp
#
# Each folder gets provenance.txt: for every command that wrote there, when,
# on which machine (CPU model, cores) and under which load it ran, so that
# the data says where it comes from.
#
#   tools/plots.sh OUT     BUILD names the build; BENCH_LOG the bench output
#                          the figures drawn from benchmarks read (default:
#                          BUILD/bench/last-run.txt when there is one, else
#                          notebooks-out/bench/last-run.txt)
#
# Stops at the first command that fails (exit 1, naming it). Run from
# anywhere: it works from the repository root, where the plot scripts are.
set -euo pipefail
shopt -s nullglob
case "${1:-}" in -h|--help|'') sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; [ -n "${1:-}" ]; exit ;; esac
root_out=$1
cd "$(dirname "$0")/.."
. tools/bench.sh
if [ -z "${BENCH_LOG:-}" ]; then
    BENCH_LOG=notebooks-out/bench/last-run.txt
    [ -f "$BUILD/bench/last-run.txt" ] && BENCH_LOG=$BUILD/bench/last-run.txt
fi

# plot_made WHAT: one line of the current folder's provenance.txt: the date,
# the machine and its load now, and WHAT made the files.
plot_made() {
    printf '%s | %s | %s\n' "$(date -u '+%Y-%m-%d %H:%M UTC')" "$(bench_machine)" "$1" >> "$out/provenance.txt"
}

# plot_run PROGRAM ARGS...: runs a chapter's program (its output shown) and
# says so in provenance.txt, the folder it writes to as "--out=(this folder)".
plot_run() {
    local cmd="${*#"$BUILD/"}"
    cmd=${cmd//"--out=$out"/--out=(this folder)}
    plot_made "build/$cmd"
    echo "plots: $*"
    "$@" || { echo "plots: failed: $*" >&2; return 1; }
}

# plot_folder: a fresh provenance.txt in $out, saying what its lines are.
plot_folder() {
    mkdir -p "$out"
    echo "# what made the files of this folder: date | machine, load average at the start | command (tools/plots.sh)" \
        > "$out/provenance.txt"
}

for dir in chapters/[0-9][0-9]-*/; do
    dir=${dir%/}
    [ -f "$dir/main.c" ] || continue # parts of a chapter still to come: no program yet
    nn=$(basename "$dir" | cut -d- -f1)
    n=$((10#$nn))
    out=$root_out/chapter-$n
    if [ -f "$dir/plots.sh" ]; then
        plot_folder
        # shellcheck source=/dev/null
        . "$dir/plots.sh" || exit 1
    elif [ -f "$dir/plot.gp" ]; then
        plot_folder
        plot_run "$BUILD/chapter-$n" --plot --out="$out" || exit 1
    fi
done
