# report: `make report` (tools/report.sh, tools/plots.sh) in a scratch tree
# whose chapters the scripts have never seen, with stand-in chapter programs
# that draw a figure into --out: a chapter that plots, one that draws
# through its own plots.sh, one that draws nothing although it should, one
# without plots; then the last bench output as a table with its date and
# machine. The page shows exactly what this run drew, each figure with its
# caption and provenance; the files are readable by everyone whatever the
# umask; a failed run leaves the last report as it was, and so does one that
# did not draw a figure a lesson links to. Also, in this
# checkout: every link and image of every README (the page's, and the lessons'
# figures in notebooks-out/), each of a line, leads to a file that exists and
# is kept by the repository; the page shows every figure kept beside it, each
# with a caption.
. "$(dirname "$0")/../harness/lib.sh"

verdict=$(cd "$BUILD" && pwd)/tools/verdict
# the stand-ins draw without it, but make report asks for gnuplot first: one that draws nothing will do
mkdir -p "$T_TMP/bin" && printf '#!/bin/sh\nexit 0\n' > "$T_TMP/bin/gnuplot" && chmod +x "$T_TMP/bin/gnuplot"
export PATH="$T_TMP/bin:$PATH"
tree=$T_TMP/tree
n=$tree/notebooks-out
mkdir -p "$tree/tools" "$tree/build/tools" "$tree/chapters/04-transfer" "$tree/chapters/05-allreduce" \
    "$tree/chapters/06-ddp" "$tree/chapters/07-none" "$n/chapter-6" "$n/reference" # no bench/: the report makes it
cp tools/report.sh tools/plots.sh tools/bench.sh tools/readme_links.sh "$tree/tools/"
ln -s "$verdict" "$tree/build/tools/verdict"
for c in 04-transfer 05-allreduce 06-ddp 07-none; do echo 'int main(void) { return 0; }' > "$tree/chapters/$c/main.c"; done
echo "# Chapter 4: pinned transfer" > "$tree/chapters/04-transfer/README.md"
echo "# Chapter 5: all-reduce" > "$tree/chapters/05-allreduce/README.md"
echo "# Chapter 6: full DDP" > "$tree/chapters/06-ddp/README.md"
echo "# Chapter 7: prints only" > "$tree/chapters/07-none/README.md"
touch "$tree/chapters/04-transfer/plot.gp" "$tree/chapters/06-ddp/plot.gp"
# chapter 6 draws through `build/chapter-6 --plot --out=DIR`, as gnuplot writes (the umask's
# mode), and its CSV as a program may (0600)
cat > "$tree/build/chapter-6" <<'EOF'
#!/bin/sh
case "$1 $2" in "--plot --out="*) ;; *) echo "chapter-6: unexpected arguments: $*" >&2; exit 2 ;; esac
echo '<svg/>' > "${2#--out=}/step-timeline.svg"
echo 'step,ms' > "${2#--out=}/step-timeline.csv" && chmod 0600 "${2#--out=}/step-timeline.csv"
EOF
# chapter 5 through its own plots.sh, from the bench output it is given
printf '%s\n' 'plot_run "$BUILD/chapter-5" "$out/busbw.svg" || return 1' \
    'plot_made "busbw.svg with the bench output of $BENCH_LOG"' > "$tree/chapters/05-allreduce/plots.sh"
printf '#!/bin/sh\necho "<svg/>" > "$1"\n' > "$tree/build/chapter-5"
printf '#!/bin/sh\nexit 0\n' > "$tree/build/chapter-4" # has a plot.gp, draws nothing
chmod +x "$tree/build/chapter-4" "$tree/build/chapter-5" "$tree/build/chapter-6"
printf '# captions\nstep-timeline: Where a step goes.\n' > "$tree/chapters/06-ddp/captions.txt"
printf 'busbw: Bandwidth against size.\n' > "$tree/chapters/05-allreduce/captions.txt"
echo '<svg/>' > "$n/chapter-6/old-figure.svg" # drawn by an earlier report, drawn no more
cat > "$tree/build/last-run.txt" <<'EOF'
date: 2031-01-02 03:04 UTC
machine: a test CPU, 2 cores
memory: 1.0 GiB
commit: abc1234

== chapter 6
bench: overlapped step, 4 ranks: 12.5 ms | the same step without overlap: 20 ms | ratio 1.60 | target >= 1.5 | PASS
bench: pinned copy | PCIe limit | target >= 0.8 | not run: no GPU

summary: 2 verdicts: 1 PASS, 0 MISS, 1 not run
EOF
mkdir -p "$tree/build/bench" && cp "$tree/build/last-run.txt" "$tree/build/bench/last-run.txt"
echo "the report's page before" > "$n/README.md"
report() { t_run env BUILD=build bash -c "cd '$tree' && umask 077 && bash tools/report.sh"; }
page=$n/README.md
has() { grep -qF -- "$2" "$page" && t_pass "$1" || t_failed "$1" "the page lacks '$2'"; }

# chapter 4 should draw and drew nothing: no report
report
if [ "$T_STATUS" = 1 ] && grep -q "chapter 4: chapters/04-transfer draws plots, and this run drew none" <<<"$T_OUT"; then
    t_pass refuses_a_chapter_that_drew_nothing
else t_failed refuses_a_chapter_that_drew_nothing "exit $T_STATUS: $(tail -n 3 <<<"$T_OUT")"; fi
if grep -qx "the report's page before" "$page" && [ -f "$n/chapter-6/old-figure.svg" ]; then
    t_pass a_failed_report_changes_nothing
else t_failed a_failed_report_changes_nothing "the page or the figures changed"; fi

# a figure without a caption: no report, naming it
rm "$tree/chapters/04-transfer/plot.gp"
mv "$tree/chapters/05-allreduce/captions.txt" "$T_TMP/captions.txt"
report
if [ "$T_STATUS" = 1 ] && grep -qF "chapter-5/busbw.svg (chapters/05-allreduce/captions.txt has no line 'busbw: ...')" <<<"$T_OUT"
then t_pass refuses_a_figure_without_caption
else t_failed refuses_a_figure_without_caption "exit $T_STATUS: $(tail -n 3 <<<"$T_OUT")"; fi
mv "$T_TMP/captions.txt" "$tree/chapters/05-allreduce/captions.txt"

# a lesson links to a file of notebooks-out/ this run did not draw (a figure drawn from a bench
# output that lacks its data): no report, naming the README's line and the file
lesson=$tree/chapters/06-ddp/README.md
cp "$lesson" "$T_TMP/lesson.md"
echo 'Data [step-timeline.csv](../../notebooks-out/chapter-6/step-timeline.csv), ![acc](../../notebooks-out/chapter-6/accuracy.svg)' >> "$lesson"
report
if [ "$T_STATUS" = 1 ] && grep -qx "the report's page before" "$page" && grep -qF \
    "chapters/06-ddp/README.md:2 shows notebooks-out/chapter-6/accuracy.svg, and this run did not draw it" <<<"$T_OUT"
then t_pass refuses_to_take_away_a_figure_a_lesson_shows
else t_failed refuses_to_take_away_a_figure_a_lesson_shows "exit $T_STATUS: $(tail -n 3 <<<"$T_OUT")"; fi
cp "$T_TMP/lesson.md" "$lesson"

report
if [ "$T_STATUS" = 0 ]; then t_pass writes_the_page
else t_failed writes_the_page "exit $T_STATUS: $(tail -n 5 <<<"$T_OUT")"; fi
has new_chapter_found "### Chapter 6: full DDP"
has plot_inline "![chapter 6: step-timeline](chapter-6/step-timeline.svg)"
has caption_under_it "*Where a step goes.*"
has csv_linked "(chapter-6/step-timeline.csv)"
has provenance_command "build/chapter-6 --plot --out=(this folder)"
has provenance_machine "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), $(nproc) cores"
has drawn_by_its_plots_sh "![chapter 5: busbw](chapter-5/busbw.svg)"
has given_the_last_bench "busbw.svg with the bench output of build/bench/last-run.txt"
has no_plot_chapter "This chapter draws no plot: \`make chapter-7\`"
has bench_date_and_machine "Run on 2031-01-02 03:04 UTC, on a test CPU, 2 cores"
has bench_row "| overlapped step, 4 ranks | 12.5 ms | the same step without overlap | 20 ms | 1.60 | >= 1.5 | **PASS** |"
has bench_not_run_row "not run: no GPU"
has reference_linked "[\`reference/\`](reference/)"
if grep -q "old-figure" "$page" || [ -e "$n/chapter-6/old-figure.svg" ]; then
    t_failed shows_only_what_it_drew "a figure this run did not draw is still there"
else t_pass shows_only_what_it_drew; fi
if cmp -s "$tree/build/last-run.txt" "$n/bench/last-run.txt"; then t_pass keeps_the_last_bench
else t_failed keeps_the_last_bench "notebooks-out/bench/last-run.txt is not build/bench/last-run.txt"; fi
modes=$(find "$n" -type f ! -perm 0644 -printf '%p %m\n'; find "$n" -type d ! -perm 0755 -printf '%p %m\n')
if [ -z "$modes" ]; then t_pass readable_by_everyone
else t_failed readable_by_everyone "under umask 077: $(tr '\n' ' ' <<<"$modes")"; fi
if [ -e "$tree/build/report" ]; then t_failed no_temporary_left "build/report was left"
else t_pass no_temporary_left; fi

# A bench output with a broken verdict line: the report refuses it, keeps the old page.
echo "bench: overlapped step: fast | ratio 2 | PASS" >> "$tree/build/bench/last-run.txt"
cp "$page" "$T_TMP/before.md"
t_fail refuses_a_bad_verdict_line 1 "line 11" env BUILD=build bash -c "cd '$tree' && bash tools/report.sh"
if cmp -s "$page" "$T_TMP/before.md"; then t_pass keeps_the_old_page; else t_failed keeps_the_old_page "the page changed"; fi

# Without a bench run anywhere: said; and no reference/ folder: no link to it.
rm -rf "$tree/build/bench" "$n/bench" "$n/reference"
t_ok without_a_bench_run env BUILD=build bash -c "cd '$tree' && bash tools/report.sh"
has says_no_bench_yet "No \`make bench\` has been run here yet"
if grep -q "reference/" "$page"; then t_failed no_link_to_a_missing_folder "the page links to reference/"
else t_pass no_link_to_a_missing_folder; fi

# tools/readme_links.sh, which the checks below and make report read: every link of a line, each
# resolved from its README's folder; web pages and anchors left out.
mkdir -p "$T_TMP/links/docs"
printf '%s\n' 'See [a](../notebooks-out/a.csv "its data") and ![b](b.svg), [the web](https://example.org), [c](#c).' \
    '[d](../d.md#part)' > "$T_TMP/links/docs/README.md"
t_run bash tools/readme_links.sh "$T_TMP/links"
want=$(printf 'docs/README.md:1\tnotebooks-out/a.csv\ndocs/README.md:1\tdocs/b.svg\ndocs/README.md:2\td.md')
if [ "$T_STATUS" = 0 ] && [ "$T_OUT" = "$want" ]; then t_pass readme_links_every_link_of_a_line
else t_failed readme_links_every_link_of_a_line "exit $T_STATUS: $(tr '\n\t' '; ' <<<"$T_OUT")"; fi

# This checkout: every README's links (the report's page, and the lessons' figures in
# notebooks-out/) lead to files that exist and that git keeps; and the page shows every
# figure kept beside it, with a caption.
page=notebooks-out/README.md
if [ ! -f "$page" ]; then
    t_failed committed_page "$page is missing (make report writes it)"
    exit 0
fi
kept() { ! git rev-parse --git-dir >/dev/null 2>&1 || ! git check-ignore -q --no-index "$1"; }
problems=$(bash tools/readme_links.sh | while IFS=$'\t' read -r where target; do
    if [ ! -e "$target" ]; then echo "$where: $target (missing)"
    elif [ -f "$target" ] && ! kept "$target"; then echo "$where: $target (ignored by git)"; fi
done)
if [ -z "$problems" ]; then t_pass readme_links_exist
else t_failed readme_links_exist "$(tr '\n' ' ' <<<"$problems")"; fi
problems=$(for svg in notebooks-out/chapter-*/*.svg; do
    [ -f "$svg" ] || continue
    rel=${svg#notebooks-out/}
    grep -qF "]($rel)" "$page" || { echo "$rel (not shown)"; continue; }
    grep -A 2 -F "]($rel)" "$page" | grep -q '^\*[^*].*\*$' || echo "$rel (no caption)"
done)
if [ -z "$problems" ]; then t_pass committed_page_shows_every_figure_with_caption
else t_failed committed_page_shows_every_figure_with_caption "$(tr '\n' ' ' <<<"$problems")"; fi
problems=$(for d in notebooks-out/chapter-*/; do [ -f "$d/provenance.txt" ] || echo "${d%/} has no provenance.txt"; done)
if [ -z "$problems" ]; then t_pass committed_figures_say_where_they_were_made
else t_failed committed_figures_say_where_they_were_made "$(tr '\n' ' ' <<<"$problems")"; fi
