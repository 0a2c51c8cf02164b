#!/usr/bin/env bash
# report.sh: `make report`. Draws every chapter's plots afresh
# (tools/plots.sh) and writes notebooks-out/README.md, the one page a reader
# opens instead of running the chapters: every plot inline with its caption
# (chapters/NN-name/captions.txt, one sentence per figure: what to see), its
# data, and what made it when and where (provenance.txt); then the last
# `make bench`'s verdicts as a table with its date and machine.
#
# The report is the only thing that writes the committed figures. It draws
# into a folder of its own under BUILD and moves it into notebooks-out/ only
# when everything was drawn and every figure has its caption: the page shows
# exactly what this run drew (a figure no chapter draws any more is gone), and
# a run that fails leaves the last report as it was. A run that did not draw
# a file a README links to in notebooks-out/chapter-N/ fails, naming both
# (tools/readme_links.sh), rather than take it away from the lesson. Every
# file it writes is 0644 and every folder 0755, readable by everyone,
# whatever the umask.
#
# The benchmarks' output: BUILD/bench/last-run.txt when `make bench` ran since
# the last `make clean` (copied into notebooks-out/bench/), else the one the
# report already holds. Chapters are found by folder (chapters/NN-name/), so a
# new chapter appears as soon as it exists, with its plots once it draws some.
# BUILD names the build (its chapter programs draw; its tools/verdict reads the
# bench output).
set -euo pipefail
shopt -s nullglob
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/.."
umask 022 # what this script and the programs it runs create: readable by everyone
. tools/bench.sh
out=notebooks-out
started=$(date -u '+%Y-%m-%d %H:%M UTC')
machine=$(bench_machine) # with the load average at the start
bench_log=$out/bench/last-run.txt
[ -f "$BUILD/bench/last-run.txt" ] && bench_log=$BUILD/bench/last-run.txt
if ! command -v gnuplot >/dev/null 2>&1; then
    echo "report: gnuplot is not installed, so no figure can be drawn (apt-get install gnuplot-nox); the report is unchanged" >&2
    exit 1
fi
if [ -f "$bench_log" ] && ! "$BUILD/tools/verdict" --check < "$bench_log" >/dev/null; then
    echo "report: $bench_log: a verdict line does not parse (above); the report is unchanged" >&2
    exit 1
fi

stage=$BUILD/report
rm -rf "$stage"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bench"
BENCH_LOG=$bench_log bash tools/plots.sh "$stage"
[ ! -f "$bench_log" ] || cp "$bench_log" "$stage/bench/last-run.txt"

header_field() { sed -n "s/^$1: //p" "$bench_log" | head -n 1; } # a field of the bench log's header

# caption CHAPTER_DIR NAME: the sentence captions.txt gives figure NAME ("NAME: sentence").
caption() { [ -f "$1/captions.txt" ] && sed -n "s/^$2: //p" "$1/captions.txt" | head -n 1; }

missing_captions=() drew_nothing=()
{
cat <<'EOF'
# notebooks-out: what the chapters measured, on one page

<!-- Written by `make report` (tools/report.sh); edit that script, not this page. -->

Everything here is written by `make report`, and only by it: the chapters write to `build/out/`
when you run them.

| where | what | made by |
|-------|------|---------|
| `chapter-N/*.csv` | each chapter's plotted experiments, as data | `make report` (`tools/plots.sh`: `build/chapter-N --plot`, or the chapter's `plots.sh`) |
| `chapter-N/*.svg`, `*.png` | their plots, rendered by gnuplot from the CSV | `make report` |
| `chapter-N/provenance.txt` | what made each folder's files: the command, the date, the machine and its load | `make report` |
| `bench/last-run.txt` | the whole output of the last `make bench`, with its date, machine and commit | `make bench` (in `build/bench/`), copied here by `make report` |
| `README.md` | this page: the plots inline with their captions, the benchmark verdicts as a table | `make report` |
EOF
if [ -d "$out/reference" ]; then
    echo "| [\`reference/\`](reference/) | runs on real GPUs, with device, driver, CUDA and NCCL versions | by hand, committed |"
fi
cat <<'EOF'

Regenerate it all with `make bench report` (the benchmarks take many minutes; `make report` alone
draws every plot again, in a few minutes, and keeps the last benchmark table). The repository keeps
this page with the SVG plots and the CSV files it shows, their provenance and the last benchmark
output, so that it reads without running anything; the PNG copies are not kept. Every figure below
comes from the machine and date it names: rerun on yours before you quote one.

EOF

echo "## The chapters"
echo
echo "Every plot below was drawn by \`make report\` from $started, on $machine (the load"
echo "average at the start), unless its provenance says it was drawn from a benchmark's output."
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
    svgs=("$stage/chapter-$n"/*.svg)
    csvs=("$stage/chapter-$n"/*.csv)
    if [ ${#svgs[@]} = 0 ]; then
        if [ -d "$stage/chapter-$n" ]; then
            drew_nothing+=("chapter $n: $dir draws plots, and this run drew none (its output is above)")
        elif [ -f "$dir/main.c" ]; then
            echo "This chapter draws no plot: \`make chapter-$n\` prints what it measures."
        else
            echo "This chapter has no program yet."
        fi
        echo
    fi
    for svg in "${svgs[@]}"; do
        name=$(basename "$svg" .svg)
        text=$(caption "$dir" "$name" || true)
        [ -n "$text" ] || missing_captions+=("chapter-$n/$name.svg ($dir/captions.txt has no line '$name: ...')")
        echo "![chapter $n: $name](chapter-$n/$name.svg)"
        echo
        echo "*${text}*"
        echo
    done
    if [ ${#csvs[@]} -gt 0 ]; then
        printf 'Data:'
        for csv in "${csvs[@]}"; do printf ' [`%s`](chapter-%s/%s)' "$(basename "$csv")" "$n" "$(basename "$csv")"; done
        printf '\n\n'
    fi
    if [ -f "$stage/chapter-$n/provenance.txt" ]; then
        echo "Made by ([\`provenance.txt\`](chapter-$n/provenance.txt)):"
        echo
        grep -v '^#' "$stage/chapter-$n/provenance.txt" | sed 's/^/- /'
        echo
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
} > "$stage/README.md"

if [ ${#drew_nothing[@]} -gt 0 ]; then
    printf 'report: %s; the report is unchanged\n' "${drew_nothing[@]}" >&2
    exit 1
fi
if [ ${#missing_captions[@]} -gt 0 ]; then
    echo "report: every figure needs a one-sentence caption; these have none (the report is unchanged):" >&2
    printf '  %s\n' "${missing_captions[@]}" >&2
    exit 1
fi
# The chapters' folders are replaced whole below: a file a lesson links to there (a figure
# drawn from a benchmark's output the bench log lacks, say) must be in this run, or the
# lesson would lose it.
links=$(bash tools/readme_links.sh)
vanishing=()
while IFS=$'\t' read -r where target; do
    [[ $target == "$out"/chapter-* && $where != "$out"/* ]] || continue
    [ -e "$stage/${target#"$out"/}" ] || vanishing+=("$where shows $target, and this run did not draw it")
done <<<"$links"
if [ ${#vanishing[@]} -gt 0 ]; then
    printf 'report: %s (its chapter'"'"'s output is above); the report is unchanged\n' "${vanishing[@]}" >&2
    exit 1
fi

# Into place: the chapters' folders as drawn now, the bench output, the page; readable
# by everyone, also what a program wrote with a mode of its own (0600, say).
find "$stage" -type f -exec chmod 0644 {} +
find "$stage" -type d -exec chmod 0755 {} +
mkdir -p "$out/bench"
rm -rf "$out"/chapter-*
for d in "$stage"/chapter-*; do mv "$d" "$out/"; done
[ ! -f "$stage/bench/last-run.txt" ] || mv "$stage/bench/last-run.txt" "$out/bench/last-run.txt"
mv "$stage/README.md" "$out/README.md"
echo "wrote $out/README.md"
