#!/usr/bin/env bash
# report.sh: `make report` (after `make plots`). Writes notebooks-out/README.md,
# the one page a reader opens instead of running the chapters: every chapter's
# plots inline (the SVGs in notebooks-out/chapter-N/), links to their CSV, and
# the last `make bench`'s verdicts as a table with its date and machine
# (notebooks-out/bench/last-run.txt, written by tools/run_benches.sh).
# Chapters are found by folder (chapters/NN-name/), so a new chapter appears
# as soon as it exists, with its plots once it draws some. BUILD names the build
# (its tools/verdict reads the bench output).
set -euo pipefail
shopt -s nullglob
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/.."
. tools/bench.sh
out=notebooks-out
bench_log=$out/bench/last-run.txt
mkdir -p "$out"
tmp=$(mktemp "$out/README.md.tmp-XXXXXX")
trap 'rm -f "$tmp"' EXIT

header_field() { sed -n "s/^$1: //p" "$bench_log" | head -n 1; } # a field of the bench log's header

{
cat <<'EOF'
# notebooks-out: what the chapters measured, on one page

<!-- Written by `make report` (tools/report.sh); edit that script, not this page. -->

Everything the programs generate lands in this folder:

| where | what | made by |
|-------|------|---------|
| `chapter-N/*.csv` | each chapter's plotted experiment, as data | `make plots` (`build/chapter-N --plot`) |
| `chapter-N/*.svg`, `*.png` | its plots, rendered by gnuplot from the CSV | `make plots` |
| `bench/last-run.txt` | the whole output of the last `make bench`, with its date, machine and commit | `make bench` |
| `README.md` | this page: the plots inline, the benchmark verdicts as a table | `make report` |
| `reference/` | runs on real GPUs, with device, driver, CUDA and NCCL versions | by hand, committed |

Regenerate it all with `make bench report` (the benchmarks take minutes; `make report` alone
redraws the plots and this page and keeps the last benchmark table). The repository keeps this
page with the SVG plots and the CSV files it shows and the last benchmark output, so that it reads
without running anything; the PNG copies are not kept. Every figure below comes from the machine
and date it names: rerun on yours before you quote one.

EOF

echo "## The chapters"
echo
echo "Plots drawn by \`make report\` on $(date -u '+%Y-%m-%d %H:%M UTC'), on $(bench_machine)."
echo
for dir in chapters/[0-9][0-9]-*/; do
    dir=${dir%/}
    nn=$(basename "$dir" | cut -d- -f1)
    n=$((10#$nn))
    title=$(sed -n '1s/^# *//p' "$dir/README.md" 2>/dev/null)
    echo "### ${title:-Chapter $n}"
    echo
    echo "The lesson: [\`$dir/README.md\`](../$dir/README.md)."
    echo
    svgs=("$out/chapter-$n"/*.svg)
    csvs=("$out/chapter-$n"/*.csv)
    if [ ${#svgs[@]} = 0 ]; then
        if [ -f "$dir/plot.gp" ]; then
            echo "No plot yet: \`make plots\` (or \`build/chapter-$n --plot\`) draws it here."
        else
            echo "This chapter draws no plot: \`make chapter-$n\` prints what it measures."
        fi
        echo
    fi
    for svg in "${svgs[@]}"; do
        name=$(basename "$svg" .svg)
        echo "![chapter $n: $name](chapter-$n/$name.svg)"
        echo
    done
    if [ ${#csvs[@]} -gt 0 ]; then
        printf 'Data:'
        for csv in "${csvs[@]}"; do printf ' [`%s`](chapter-%s/%s)' "$(basename "$csv")" "$n" "$(basename "$csv")"; done
        printf '\n\n'
    fi
done

echo "## Benchmarks: the last \`make bench\`"
echo
if [ ! -f "$bench_log" ]; then
    echo "No \`make bench\` has been run here yet: run it, then \`make report\`."
else
    echo "Run on $(header_field date), on $(header_field machine), $(header_field memory) of memory, at commit"
    echo "\`$(header_field commit)\`. $(header_field mode)"
    echo
    "$BUILD/tools/verdict" --table < "$bench_log"
    echo
    summary=$(sed -n 's/^summary: //p' "$bench_log")
    echo "${summary:+$summary. }A MISS is a finding, not a failure: each chapter's README discusses its figures"
    echo "and their spread over runs. The whole output, with the detail lines of every benchmark, is"
    echo "[\`bench/last-run.txt\`](bench/last-run.txt)."
    failed=$(grep '^FAILED TO RUN: ' "$bench_log" || true)
    [ -z "$failed" ] || { echo; echo "**Did not finish:**"; sed 's/^FAILED TO RUN: /- /' <<<"$failed"; }
fi
} > "$tmp"
mv "$tmp" "$out/README.md"
echo "wrote $out/README.md"
