# report: `make report`'s page (tools/report.sh) in a scratch tree whose
# chapters the script has never seen: a chapter with plots, one whose plot
# is not drawn yet, one that draws none; then the last bench output as a table
# with its date and machine. Also: every image the page in this checkout shows
# exists and is kept by the repository, so that opening it shows the plots.
. "$(dirname "$0")/../harness/lib.sh"

build=$(cd "$BUILD" && pwd)
tree=$T_TMP/tree
mkdir -p "$tree/tools" "$tree/chapters/04-transfer" "$tree/chapters/06-ddp" "$tree/chapters/07-none" \
    "$tree/notebooks-out/chapter-6" "$tree/notebooks-out/bench"
cp tools/report.sh tools/bench.sh "$tree/tools/"
echo "# Chapter 4: pinned transfer" > "$tree/chapters/04-transfer/README.md"
touch "$tree/chapters/04-transfer/plot.gp" "$tree/chapters/06-ddp/plot.gp"
echo "# Chapter 6: full DDP" > "$tree/chapters/06-ddp/README.md"
echo "# Chapter 7: prints only" > "$tree/chapters/07-none/README.md"
echo '<svg/>' > "$tree/notebooks-out/chapter-6/step-timeline.svg"
echo 'step,ms' > "$tree/notebooks-out/chapter-6/step-timeline.csv"
cat > "$tree/notebooks-out/bench/last-run.txt" <<'EOF'
date: 2031-01-02 03:04 UTC
machine: a test CPU, 2 cores
memory: 1.0 GiB
commit: abc1234

== chapter 6
bench: overlapped step, 4 ranks: 12.5 ms | the same step without overlap: 20 ms | ratio 1.60 | target >= 1.5 | PASS
bench: pinned copy | PCIe limit | target >= 0.8 | not run: no GPU

summary: 2 verdicts: 1 PASS, 0 MISS, 1 not run
EOF

t_ok writes_the_page env BUILD="$build" bash "$tree/tools/report.sh"
page=$tree/notebooks-out/README.md
has() { grep -qF -- "$2" "$page" && t_pass "$1" || t_failed "$1" "the page lacks '$2'"; }
if [ -f "$page" ]; then
    has new_chapter_found "### Chapter 6: full DDP"
    has plot_inline "![chapter 6: step-timeline](chapter-6/step-timeline.svg)"
    has csv_linked "(chapter-6/step-timeline.csv)"
    has plot_not_drawn_yet "No plot yet: \`make plots\` (or \`build/chapter-4 --plot\`)"
    has no_plot_chapter "This chapter draws no plot: \`make chapter-7\`"
    has bench_date_and_machine "Run on 2031-01-02 03:04 UTC, on a test CPU, 2 cores"
    has bench_row "| overlapped step, 4 ranks | 12.5 ms | the same step without overlap | 20 ms | 1.60 | >= 1.5 | **PASS** |"
    has bench_not_run_row "not run: no GPU"
    if ls "$tree/notebooks-out/"README.md.tmp-* >/dev/null 2>&1; then t_failed no_temporary_left "a README.md.tmp-* was left"
    else t_pass no_temporary_left; fi
fi

# A bench output with a broken verdict line: the report refuses it, keeps the old page.
echo "bench: overlapped step: fast | ratio 2 | PASS" >> "$tree/notebooks-out/bench/last-run.txt"
cp "$page" "$T_TMP/before.md"
t_fail refuses_a_bad_verdict_line 1 "line 11" env BUILD="$build" bash "$tree/tools/report.sh"
if cmp -s "$page" "$T_TMP/before.md"; then t_pass keeps_the_old_page; else t_failed keeps_the_old_page "the page changed"; fi

rm -f "$tree/notebooks-out/bench/last-run.txt"
t_ok without_a_bench_run env BUILD="$build" bash "$tree/tools/report.sh"
has says_no_bench_yet "No \`make bench\` has been run here yet"

# The page in this checkout: every image it shows is there and kept by git.
if [ ! -f notebooks-out/README.md ]; then
    t_failed committed_page "notebooks-out/README.md is missing (make report writes it)"
else
    missing=$(sed -n 's/.*!\[[^]]*\](\([^)]*\)).*/\1/p' notebooks-out/README.md | while read -r img; do
        if [ ! -f "notebooks-out/$img" ]; then echo "$img (missing)"
        elif git rev-parse --git-dir >/dev/null 2>&1 && git check-ignore -q --no-index "notebooks-out/$img"; then
            echo "$img (ignored by git)"
        fi
    done)
    if [ -z "$missing" ]; then t_pass committed_page_shows_its_plots
    else t_failed committed_page_shows_its_plots "$(tr '\n' ' ' <<<"$missing")"; fi
fi
